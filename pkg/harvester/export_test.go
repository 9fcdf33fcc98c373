package harvester

// StopCacheForTest ends the cache of an identity's connection as its Start returning would, and
// leaves the connection in place: what Get finds after a cache stopped by itself. It reports
// whether there was such a connection.
func (f *ClientFactory) StopCacheForTest(key string) bool {
	f.mu.Lock()
	c, ok := f.connections[key]
	f.mu.Unlock()
	if ok {
		c.cancel()
	}
	return ok
}
