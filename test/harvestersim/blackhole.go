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

package harvestersim

import (
	"context"
	"net"
	"sync"
)

// blackHole is a network path that can silently stop carrying bytes, as when a firewall drops a
// host's packets or a switch fails: nothing is refused or reset, nothing arrives. Connections
// accepted while it is on (the kernel completes the TCP handshake) and those already open stop
// in both directions; what was on its way is delivered once it is off again (TCP retransmits),
// unless a side gave up and closed the connection meanwhile.
type blackHole struct {
	mu   sync.Mutex
	open chan struct{} // closed while bytes flow
}

func newBlackHole() *blackHole {
	open := make(chan struct{})
	close(open)
	return &blackHole{open: open}
}

func (b *blackHole) set(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.open:
		if on {
			b.open = make(chan struct{})
		}
	default:
		if !on {
			close(b.open)
		}
	}
}

// pass waits until bytes flow, or the connection is closed.
func (b *blackHole) pass(closed <-chan struct{}) error {
	b.mu.Lock()
	open := b.open
	b.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-closed:
		return net.ErrClosed
	}
}

// listener puts every accepted connection behind the black hole.
func (b *blackHole) listener(l net.Listener) net.Listener { return &holeListener{Listener: l, hole: b} }

type holeListener struct {
	net.Listener
	hole *blackHole
}

func (l *holeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &holeConn{Conn: c, hole: l.hole, closed: make(chan struct{})}, nil
}

type holeConn struct {
	net.Conn
	hole      *blackHole
	closeOnce sync.Once
	closed    chan struct{}
}

// Read hands over what arrived only while bytes flow.
func (c *holeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if perr := c.hole.pass(c.closed); perr != nil {
			return 0, perr
		}
	}
	return n, err
}

// Write sends only while bytes flow.
func (c *holeConn) Write(p []byte) (int, error) {
	if err := c.hole.pass(c.closed); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *holeConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// Endpoint is another address of the simulated Harvester, with its own fault knobs and black
// hole: to the provider, a Harvester of its own (another tenant's), served by the same
// apiserver and controllers.
type Endpoint struct {
	// Faults act on this endpoint's requests only.
	Faults *Faults
	proxy  *faultProxy
	h      *Harvester
}

// NewEndpoint opens another address for token clients; Stop closes it with the simulator.
func (h *Harvester) NewEndpoint() (*Endpoint, error) {
	faults := newFaults()
	p, err := startFaultProxy(h.Env.Config, faults)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.endpoints = append(h.endpoints, p)
	h.mu.Unlock()
	return &Endpoint{Faults: faults, proxy: p, h: h}, nil
}

// ProviderKubeconfig is Harvester.ProviderKubeconfig through this endpoint.
func (e *Endpoint) ProviderKubeconfig(ctx context.Context) ([]byte, error) {
	return e.h.kubeconfigVia(ctx, e.proxy, ProviderIdentityNamespace, ProviderIdentityName, "", providerTokenLifetime)
}

// BlackHoleAPI makes this endpoint drop every byte in both directions until on is false (see
// Harvester.BlackHoleAPI).
func (e *Endpoint) BlackHoleAPI(on bool) { e.proxy.hole.set(on) }

// BlackHoleAPI makes the simulated Harvester silent for token clients, without refusing
// anything: new connections are accepted but never answered, open ones (watches included) carry
// nothing; what was sent arrives once on is false again. Clients learn of it only by their own
// timeouts, as when a network path to Harvester fails.
func (h *Harvester) BlackHoleAPI(on bool) { h.proxy.hole.set(on) }
