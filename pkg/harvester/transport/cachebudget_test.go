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

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// A connection's budget counts each object once however often it changes, gives back what is
// deleted, and fires once. Past the manager's total, the connection that holds the most stops,
// not the one whose object came last; a stopped connection is not counted again, and its bytes
// leave the total once its cache has stopped.
func TestCacheBudgetsCountEachObjectOnceAndStopTheLargest(t *testing.T) {
	g := NewWithT(t)
	object := func(name string, size int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: name}, Data: map[string]string{"x": strings.Repeat("x", size)}}
	}
	var fired []string
	all := &budgets{limit: 10_000}
	budget := func(name string, limit int64) *cacheBudget {
		b := newCacheBudget(limit, func(_ int64, objects int, cause budgetCause) {
			fired = append(fired, fmt.Sprintf("%s:%d:%v", name, objects, cause == managerBudget))
		})
		all.add(b)
		return b
	}
	a, b, c := budget("a", 4_000), budget("b", 100_000), budget("c", 100_000)

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
	g.Expect(fired).To(Equal([]string{"a:3:false"}))
	a.OnAdd(object("five", 100), false)
	g.Expect(fired).To(HaveLen(1), "fires once")
	a.release()
	all.remove(a)
	g.Expect(all.total.Load()).To(BeZero(), "a stopped cache's bytes leave the total")

	// b holds the most; c's small object takes the total past the manager's limit: b stops.
	b.OnAdd(object("b-1", 4_000), false)
	b.OnAdd(object("b-2", 4_000), false)
	c.OnAdd(object("c-1", 1_000), false)
	g.Expect(fired).To(HaveLen(1))
	c.OnAdd(object("c-2", 1_500), false)
	g.Expect(fired).To(Equal([]string{"a:3:false", "b:2:true"}))
	// b's bytes still count until its cache stops, but b is not stopped again, nor c for them.
	c.OnAdd(object("c-3", 100), false)
	g.Expect(fired).To(HaveLen(2))
}
