package transport

// StopCacheForTest ends the cache of an identity's connection for cluster as its Start returning
// would, and leaves the connection in place: what Get finds after a cache stopped by itself. It
// reports whether there was such a connection.
func (f *ClientFactory) StopCacheForTest(identity, cluster string) bool {
	f.mu.Lock()
	c, ok := f.connections[connectionKey(identity, cluster)]
	f.mu.Unlock()
	if ok {
		c.cancel()
	}
	return ok
}
