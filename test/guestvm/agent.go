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

package guestvm

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"
)

// The guest agent's protocol (QEMU's guest agent, as virt-handler speaks it): one JSON command
// per line, {"execute": name, "arguments": {...}}, answered by {"return": ...} or {"error":
// {"class", "desc"}}. Nothing ties an answer to its command, so each call first sends
// guest-sync with a fresh number and discards whatever arrives before that number comes back (a
// reply a timed-out call left behind).

// ErrAgentNotReady means the guest agent did not answer (the guest has not booted far enough,
// or it runs no agent).
var ErrAgentNotReady = errors.New("the guest agent does not answer")

// AgentError is an error the guest agent returned.
type AgentError struct{ Class, Desc string }

func (e *AgentError) Error() string { return fmt.Sprintf("guest agent: %s: %s", e.Class, e.Desc) }

// callTimeout bounds one exchange with the agent.
const callTimeout = 10 * time.Second

// Call runs one guest-agent command and decodes its return value into out (nil: ignored).
func (g *Guest) Call(ctx context.Context, command string, args, out any) error {
	if exited, err := g.Exited(); exited {
		return fmt.Errorf("the guest has stopped (%v)", err)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", g.agentSocket())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAgentNotReady, err)
	}
	defer func() { _ = conn.Close() }()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	r := bufio.NewReader(conn)

	id := rand.Int64N(1 << 40)
	if err := send(conn, "guest-sync", map[string]any{"id": id}); err != nil {
		return err
	}
	for {
		var reply struct {
			Return json.RawMessage `json:"return"`
		}
		if err := receive(r, &reply); err != nil {
			return fmt.Errorf("%w: %v", ErrAgentNotReady, err)
		}
		var got int64
		if json.Unmarshal(reply.Return, &got) == nil && got == id {
			break
		}
	}
	if err := send(conn, command, args); err != nil {
		return err
	}
	var reply struct {
		Return json.RawMessage `json:"return"`
		Error  *AgentError     `json:"error"`
	}
	if err := receive(r, &reply); err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	if reply.Error != nil {
		return reply.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Return, out)
}

func send(conn net.Conn, command string, args any) error {
	msg := map[string]any{"execute": command}
	if args != nil {
		msg["arguments"] = args
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = conn.Write(append(data, '\n'))
	return err
}

func receive(r *bufio.Reader, into any) error {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, into)
}

// Interface is one of the guest's network interfaces as guest-network-get-interfaces reports it.
type Interface struct {
	Name            string `json:"name"`
	HardwareAddress string `json:"hardware-address"`
	IPAddresses     []struct {
		Type    string `json:"ip-address-type"` // ipv4 or ipv6
		Address string `json:"ip-address"`
		Prefix  int    `json:"prefix"`
	} `json:"ip-addresses"`
}

// Interfaces is guest-network-get-interfaces: what virt-handler turns into a VMI's
// status.interfaces.
func (g *Guest) Interfaces(ctx context.Context) ([]Interface, error) {
	var out []Interface
	return out, g.Call(ctx, "guest-network-get-interfaces", nil, &out)
}

// OSInfo is guest-get-osinfo: what virt-handler turns into a VMI's status.guestOSInfo.
type OSInfo struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	PrettyName    string `json:"pretty-name"`
	VersionID     string `json:"version-id"`
	KernelRelease string `json:"kernel-release"`
	Machine       string `json:"machine"`
}

// OSInfo asks the guest agent for the guest's operating system.
func (g *Guest) OSInfo(ctx context.Context) (OSInfo, error) {
	var out OSInfo
	return out, g.Call(ctx, "guest-get-osinfo", nil, &out)
}

// HostName is guest-get-host-name.
func (g *Guest) HostName(ctx context.Context) (string, error) {
	var out struct {
		HostName string `json:"host-name"`
	}
	return out.HostName, g.Call(ctx, "guest-get-host-name", nil, &out)
}

// ReadFile reads a file of the guest through the agent (guest-file-open, -read, -close); a file
// that is not there is an AgentError.
func (g *Guest) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var handle int64
	if err := g.Call(ctx, "guest-file-open", map[string]any{"path": path, "mode": "r"}, &handle); err != nil {
		return nil, err
	}
	defer func() { _ = g.Call(ctx, "guest-file-close", map[string]any{"handle": handle}, nil) }()
	var data []byte
	for {
		var chunk struct {
			Count int    `json:"count"`
			Buf   string `json:"buf-b64"`
			EOF   bool   `json:"eof"`
		}
		if err := g.Call(ctx, "guest-file-read", map[string]any{"handle": handle, "count": 65536}, &chunk); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(chunk.Buf)
		if err != nil {
			return nil, err
		}
		data = append(data, b...)
		if chunk.EOF || chunk.Count == 0 {
			return data, nil
		}
	}
}
