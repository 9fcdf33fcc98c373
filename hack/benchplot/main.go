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

// Command benchplot draws the bench's report (out/bench/report.json, written by `make bench`)
// as a PNG: machines provisioned over time, the provider's beside the bare-client baseline's
// VMs running, and the P1 latency percentiles of both. It has its own module so that the
// plotting library stays out of the product's go.mod.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// report is the part of the bench's report.json the plot reads.
type report struct {
	Machines int `json:"machines"`
	Clusters int `json:"clusters"`
	P1       struct {
		Provider percentiles  `json:"provider"`
		Baseline *percentiles `json:"baseline"`
	} `json:"p1"`
	// P1Relay's baseline is the relay probe: P1's floor under the same load.
	P1Relay *struct {
		Baseline *percentiles `json:"baseline"`
	} `json:"p1Relay"`
	Series struct {
		ProviderProvisioned []float64 `json:"providerProvisioned"`
		BaselineRunning     []float64 `json:"baselineRunning"`
	} `json:"series"`
}

type percentiles struct {
	P50 float64 `json:"p50Ms"`
	P95 float64 `json:"p95Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

func main() {
	in := flag.String("in", "out/bench/report.json", "the bench's report")
	out := flag.String("out", "out/bench/bench.png", "the PNG to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("reading %s: %w", in, err)
	}
	overTime, err := provisionedOverTime(r)
	if err != nil {
		return err
	}
	latency, err := latencyPercentiles(r)
	if err != nil {
		return err
	}
	const width, height = 16 * vg.Centimeter, 10 * vg.Centimeter
	img := vgimg.New(2*width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter / 2,
		PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter / 2, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2}
	overTime.Draw(tiles.At(dc, 0, 0))
	latency.Draw(tiles.At(dc, 1, 0))
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// cumulative turns sorted offsets into a step curve: n machines done at each offset.
func cumulative(offsets []float64) plotter.XYs {
	xys := plotter.XYs{{X: 0, Y: 0}}
	for i, x := range offsets {
		xys = append(xys, plotter.XY{X: x, Y: float64(i + 1)})
	}
	return xys
}

func provisionedOverTime(r report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d machines in %d clusters, created at once", r.Machines, r.Clusters)
	p.X.Label.Text = "seconds since creation"
	p.Y.Label.Text = "machines"
	p.Legend.Top, p.Legend.Left = true, true
	for _, s := range []struct {
		name    string
		offsets []float64
		color   color.Color
	}{
		{"provider: HarvesterMachine provisioned", r.Series.ProviderProvisioned, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"baseline: VM running, seen by a bare client", r.Series.BaselineRunning, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	} {
		if len(s.offsets) == 0 {
			continue
		}
		line, err := plotter.NewLine(cumulative(s.offsets))
		if err != nil {
			return nil, err
		}
		line.Color = s.color
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

func latencyPercentiles(r report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "P1: VMI running with an address -> provisioned"
	p.Y.Label.Text = "ms"
	values := func(q percentiles) plotter.Values { return plotter.Values{q.P50, q.P95, q.P99, q.Max} }
	w := vg.Points(14)
	provider, err := plotter.NewBarChart(values(r.P1.Provider), w)
	if err != nil {
		return nil, err
	}
	provider.Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	provider.Offset = -w
	p.Add(provider)
	p.Legend.Add("provider", provider)
	if r.P1.Baseline != nil {
		baseline, err := plotter.NewBarChart(values(*r.P1.Baseline), w)
		if err != nil {
			return nil, err
		}
		baseline.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
		p.Add(baseline)
		p.Legend.Add("baseline (bare client's watch)", baseline)
	}
	if r.P1Relay != nil && r.P1Relay.Baseline != nil {
		relay, err := plotter.NewBarChart(values(*r.P1Relay.Baseline), w)
		if err != nil {
			return nil, err
		}
		relay.Color = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
		relay.Offset = w
		p.Add(relay)
		p.Legend.Add("floor: a bare relay under the same load", relay)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX("p50", "p95", "p99", "max")
	p.Add(plotter.NewGrid())
	return p, nil
}
