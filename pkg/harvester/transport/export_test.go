/*
Copyright 2026 The cluster-api-provider-harvester Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
