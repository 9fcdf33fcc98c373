package transport

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// A connection's budget counts each object once however often it changes, gives back what is
// deleted, and fires once; the manager's total across connections stops the connection whose
// object passes it, not the others, and a stopped connection gives its bytes back.
func TestCacheBudgetsCountEachObjectOnceAndStopWhoPassesThem(t *testing.T) {
	g := NewWithT(t)
	object := func(name string, size int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: name}, Data: map[string]string{"x": strings.Repeat("x", size)}}
	}
	var fired []string
	var process atomic.Int64
	budget := func(name string, limit int64) *cacheBudget {
		b := newCacheBudget(limit, func(total int64, objects int) { fired = append(fired, fmt.Sprintf("%s:%d", name, objects)) })
		b.process, b.processLimit = &process, 10_000
		return b
	}
	a, b := budget("a", 4_000), budget("b", 100_000)

	for range 5 { // one object, updated: counted once
		a.OnUpdate(nil, object("one", 1_000))
	}
	total, objects := a.Total()
	g.Expect(objects).To(Equal(1))
	g.Expect(total).To(BeNumerically("~", 1_000, 200))
	a.OnAdd(object("two", 1_000), false)
	a.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "guests/two", Obj: object("two", 1_000)})
	a.OnAdd(object("three", 1_000), false)
	g.Expect(fired).To(BeEmpty())
	a.OnAdd(object("four", 2_500), false) // past a's own 4,000
	g.Expect(fired).To(Equal([]string{"a:3"}))
	a.OnAdd(object("five", 100), false)
	g.Expect(fired).To(HaveLen(1), "fires once")

	// b stays under its own budget but passes the manager's with a's bytes counted.
	b.OnAdd(object("b-1", 3_000), false)
	g.Expect(fired).To(HaveLen(1))
	b.OnAdd(object("b-2", 3_000), false)
	g.Expect(fired).To(Equal([]string{"a:3", "b:2"}))

	// a stopped: its bytes leave the manager's count.
	before := process.Load()
	aTotal, _ := a.Total()
	a.release()
	g.Expect(process.Load()).To(Equal(before - aTotal))
}
