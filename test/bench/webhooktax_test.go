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

package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// webhooksLabel on a namespace set to "off" makes the management apiserver skip the provider's
// webhooks there while the webhook-tax phase runs (skipProviderWebhooks).
const webhooksLabel = "bench.harvester.io/webhooks"

// runWebhookTax creates n HarvesterMachines, with the spec Cluster API copies from a defaulted
// template, one after the other in a namespace the provider's webhooks serve and n in one they
// skip, alternating between the two so that both see the same
// load, and times each create as its client waits for it. The machines have no owner (the
// provider reconciles each once and waits for a Machine): the phase measures the admission
// calls, nothing else.
func runWebhookTax(ctx context.Context, c client.Client, n int) (*WebhookTax, error) {
	on, off := "webhooks-on", "webhooks-off"
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: on}},
		{ObjectMeta: metav1.ObjectMeta{Name: off, Labels: map[string]string{webhooksLabel: "off"}}},
	} {
		if err := c.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	restore, err := skipProviderWebhooks(ctx, c)
	if err != nil {
		return nil, err
	}
	defer func() { _ = restore(context.WithoutCancel(ctx)) }()
	spec := infrav1.HarvesterMachineSpec{
		CPU: 2, Memory: resource.MustParse("4Gi"),
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
	}
	// served tells whether the provider's webhooks handle a HarvesterMachine in ns: the
	// defaulting names its disk's bus, the validation refuses a change of its spec (neither is in
	// the CRD's schema). The apiserver reads webhook configurations through its own informer, so
	// the skip takes a moment to reach it.
	served := func(ctx context.Context, ns string) (defaulted, validated bool, err error) {
		probe := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"}, Spec: *spec.DeepCopy()}
		if err := c.Create(ctx, probe); err != nil {
			return false, false, err
		}
		defer func() { _ = c.Delete(ctx, probe) }()
		changed := probe.DeepCopy()
		changed.Spec.CPU++
		return probe.Spec.Disks[0].Bus != "", c.Patch(ctx, changed, client.MergeFrom(probe)) != nil, nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitFor(waitCtx, "the provider's webhooks to skip namespace "+off, func() bool {
		defaulted, validated, err := served(waitCtx, off)
		return err == nil && !defaulted && !validated
	}); err != nil {
		return nil, err
	}
	if defaulted, validated, err := served(ctx, on); err != nil || !defaulted || !validated {
		return nil, fmt.Errorf("the provider's webhooks no longer serve namespace %s (defaulted %v, validated %v): %v", on, defaulted, validated, err)
	}

	// The timed machines are made as Cluster API makes them: with the spec of a template whose
	// own defaulting has run.
	made := spec.DeepCopy()
	made.Default()
	var onTimes, offTimes []time.Duration
	var onWall, offWall time.Duration
	for i := range n {
		order := []string{on, off}
		if i%2 == 1 {
			order = []string{off, on}
		}
		for _, ns := range order {
			hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%d", i)}, Spec: *made.DeepCopy()}
			start := time.Now()
			if err := c.Create(ctx, hm); err != nil {
				return nil, fmt.Errorf("creating HarvesterMachine %s/%s: %w", ns, hm.Name, err)
			}
			d := time.Since(start)
			if ns == on {
				onTimes, onWall = append(onTimes, d), onWall+d
			} else {
				offTimes, offWall = append(offTimes, d), offWall+d
			}
		}
	}
	for _, ns := range []string{on, off} {
		if err := c.DeleteAllOf(ctx, &infrav1.HarvesterMachine{}, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("deleting the phase's HarvesterMachines: %w", err)
		}
	}
	return &WebhookTax{
		What:    fmt.Sprintf("%d HarvesterMachines with a defaulted template's spec (as Cluster API makes them) created one after the other through the provider's webhooks, against the same creates in a namespace the webhooks skip (a namespaceSelector set for the phase), alternating, after the lifecycle on a quiet management cluster; each create timed by its client", n),
		Creates: n, OnSeconds: round3(onWall.Seconds()), OffSeconds: round3(offWall.Seconds()),
		On: percentiles(onTimes), Off: percentiles(offTimes),
	}, nil
}

// skipProviderWebhooks makes the management apiserver skip the provider's webhooks in the
// namespaces labelled webhooksLabel=off, and returns what puts the configurations back.
func skipProviderWebhooks(ctx context.Context, c client.Client) (restore func(context.Context) error, err error) {
	skip := map[string]any{"matchExpressions": []any{map[string]any{
		"key": webhooksLabel, "operator": string(metav1.LabelSelectorOpNotIn), "values": []any{"off"}}}}
	var undo []func(context.Context) error
	restore = func(ctx context.Context) error {
		var errs []error
		for _, u := range undo {
			errs = append(errs, u(ctx))
		}
		return errors.Join(errs...)
	}
	for _, kind := range []string{"MutatingWebhookConfigurationList", "ValidatingWebhookConfigurationList"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind(kind))
		if err := c.List(ctx, list); err != nil {
			return nil, errors.Join(err, restore(ctx))
		}
		for i := range list.Items {
			cfg := &list.Items[i]
			original := cfg.DeepCopy()
			webhooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
			changed := false
			for _, w := range webhooks {
				if m, ok := w.(map[string]any); ok && providerWebhook(fmt.Sprint(m["name"])) {
					m["namespaceSelector"], changed = skip, true
				}
			}
			if !changed {
				continue
			}
			if err := unstructured.SetNestedSlice(cfg.Object, webhooks, "webhooks"); err != nil {
				return nil, errors.Join(err, restore(ctx))
			}
			if err := c.Patch(ctx, cfg, client.MergeFrom(original)); err != nil {
				return nil, errors.Join(err, restore(ctx))
			}
			undo = append(undo, func(ctx context.Context) error {
				current := cfg.DeepCopy()
				cfg.Object["webhooks"] = original.Object["webhooks"]
				return c.Patch(ctx, cfg, client.MergeFrom(current))
			})
		}
	}
	if len(undo) == 0 {
		return nil, errors.New("no webhook configuration of the provider's on the management cluster")
	}
	return restore, nil
}
