package bench

import (
	"sync"

	"github.com/go-logr/logr"
)

// reconcileLog counts a manager's reconciles by object, from the "Reconciling" message
// controller-runtime logs at V(5) with the controller's and the object's names, so two managers
// in one process (whose controller-runtime metrics share one registry) can be told apart.
type reconcileLog struct {
	mu      sync.Mutex
	objects map[string]int // "controller namespace/name" -> reconciles
}

func newReconcileLog() *reconcileLog { return &reconcileLog{objects: map[string]int{}} }

// Logger is the logger to give the manager (ctrl.Options.Logger); it logs nothing else.
func (l *reconcileLog) Logger() logr.Logger { return logr.New(&reconcileSink{log: l}) }

func (l *reconcileLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.objects))
	for k, v := range l.objects {
		out[k] = v
	}
	return out
}

type reconcileSink struct {
	log    *reconcileLog
	values []any
}

func (s *reconcileSink) Init(logr.RuntimeInfo)  {}
func (s *reconcileSink) Enabled(level int) bool { return true }
func (s *reconcileSink) Error(error, string, ...any) {
}

func (s *reconcileSink) Info(_ int, msg string, kv ...any) {
	if msg != "Reconciling" {
		return
	}
	var controller, namespace, name string
	all := append(append([]any{}, s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		v, _ := all[i+1].(string)
		switch all[i] {
		case "controller":
			controller = v
		case "namespace":
			namespace = v
		case "name":
			name = v
		}
	}
	if name == "" {
		return // a controller whose requests are not objects (CAPI's ClusterCache names Clusters otherwise)
	}
	s.log.mu.Lock()
	s.log.objects[controller+" "+namespace+"/"+name]++
	s.log.mu.Unlock()
}

func (s *reconcileSink) WithValues(kv ...any) logr.LogSink {
	return &reconcileSink{log: s.log, values: append(append([]any{}, s.values...), kv...)}
}

func (s *reconcileSink) WithName(string) logr.LogSink { return s }
