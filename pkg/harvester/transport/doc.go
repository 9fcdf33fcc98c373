// Package transport holds the provider's connections to Harvester: the client factory (one
// connection and cache per identity and server), the request guard (deadlines and a concurrency
// cap per Harvester), request metrics, the policy every identity kubeconfig must pass, and Error,
// the classified failure every request ends in (a condition reason, a user message, and when to
// look again).
package transport
