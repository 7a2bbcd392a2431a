package peerbench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Row is one line of the side-by-side table.
type Row struct {
	Metric string  `json:"metric"`
	Unit   string  `json:"unit"`
	Troupe float64 `json:"troupe"`
	Llama  float64 `json:"llama_cpp"`
	// Lower marks a latency, where less is better.
	Lower bool `json:"lower_is_better,omitempty"`
	// Spreads are (max-min)/median over the repetitions of each side, where
	// the row is a median of several (0: one measurement).
	TroupeSpread float64 `json:"troupe_spread,omitempty"`
	LlamaSpread  float64 `json:"llama_spread,omitempty"`
	Ratio        float64 `json:"ratio"` // Speedup, filled by Report.Finish; 0: a side is missing
}

// Speedup is how many times faster troupe is on this row: troupe/llama.cpp
// for a throughput, llama.cpp/troupe for a latency. 0 when either side
// is missing (not positive).
func (r Row) Speedup() float64 {
	if !(r.Troupe > 0) || !(r.Llama > 0) {
		return 0
	}
	if r.Lower {
		return r.Llama / r.Troupe
	}
	return r.Troupe / r.Llama
}

// Bandwidth relates decode speed at batch 1 to the machine's memory copy rate.
type Bandwidth struct {
	Copy CopyBandwidth `json:"copy"`
	// Weight bytes a decode step reads: each checkpoint's tensor data.
	TroupeWeightBytes int64 `json:"troupe_weight_bytes"`
	LlamaWeightBytes  int64 `json:"llama_weight_bytes"`
	// Achieved weight-read rates at decode depth 0, bytes/s: weight bytes × tok/s.
	TroupeBytesPerS float64 `json:"troupe_bytes_per_s"`
	LlamaBytesPerS  float64 `json:"llama_bytes_per_s"`
}

// Report is everything one run measured; it is what --json writes.
type Report struct {
	StartedAt     string        `json:"started_at"`
	Host          string        `json:"host"`
	TroupeVersion string        `json:"troupe_version"`
	Threads       int           `json:"threads"`
	Cores         int           `json:"cores"`
	Models        Models        `json:"models"`
	Loads         []LoadMark    `json:"loadavg"`
	Kernels       *KernelResult `json:"kernels,omitempty"`
	// Quant are the same kernel measurements on GGUF files of quantized
	// types that troupe wrote from the same checkpoint, both sides running
	// the same file.
	Quant     []QuantResult  `json:"quant,omitempty"`
	Serving   *ServingResult `json:"serving,omitempty"`
	Bandwidth *Bandwidth     `json:"bandwidth,omitempty"`
	Rows      []Row          `json:"rows"`
	Notes     []string       `json:"notes,omitempty"`
}

// ReadReport reads a report JSON written by Report.JSON and rebuilds its
// rows, notes and bandwidth figures from the raw numbers in it.
func ReadReport(b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	r.Finish()
	return &r, nil
}

// Finish builds the rows and the bandwidth figures from the raw results.
func (r *Report) Finish() {
	r.Rows, r.Notes = nil, nil
	if r.Kernels != nil {
		r.Rows = append(r.Rows, r.Kernels.Rows()...)
		if r.Bandwidth != nil {
			b := r.Bandwidth
			b.TroupeWeightBytes, b.LlamaWeightBytes = r.Models.Check.HFBytes, r.Models.Check.GGUFBytes
			b.TroupeBytesPerS = float64(b.TroupeWeightBytes) * r.Kernels.TroupeDecode0
			b.LlamaBytesPerS = float64(b.LlamaWeightBytes) * r.Kernels.LlamaDecode0
		}
	}
	for _, q := range r.Quant {
		for _, row := range q.Kernels.Rows() {
			row.Metric = q.Type + " " + row.Metric
			r.Rows = append(r.Rows, row)
		}
	}
	if r.Serving != nil {
		r.Rows = append(r.Rows, r.Serving.Rows()...)
		if te, le := r.Serving.Errors(); te+le > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("serving: %d failed requests on troupe, %d on llama.cpp (see the loadgen JSON)", te, le))
		}
	}
	for i := range r.Rows {
		r.Rows[i].Ratio = r.Rows[i].Speedup()
	}
	if busy := r.busiest(); r.Cores > 0 && busy > 0.5*float64(r.Cores) {
		r.Notes = append(r.Notes, fmt.Sprintf("the machine was busy (1-minute load %.2f on %d cores before the run began): "+
			"llama.cpp's spinning threads lose far more than troupe's when they are preempted, so ratios lean towards troupe; rerun on a quiet machine", busy, r.Cores))
	}
}

// QuantResult is the kernel comparison on one quantized GGUF file.
type QuantResult struct {
	Type    string        `json:"type"` // troupe quantize --type
	File    string        `json:"file"`
	Bytes   int64         `json:"bytes"`
	Kernels *KernelResult `json:"kernels"`
}

// allLoads are the load marks of the whole run in time order.
func (r *Report) allLoads() []LoadMark {
	var out []LoadMark
	if len(r.Loads) > 0 {
		out = append(out, r.Loads[0])
	}
	if r.Kernels != nil {
		out = append(out, r.Kernels.Loads...)
	}
	for _, q := range r.Quant {
		out = append(out, q.Kernels.Loads...)
	}
	if r.Serving != nil {
		out = append(out, r.Serving.Loads...)
	}
	if len(r.Loads) > 1 {
		out = append(out, r.Loads[1:]...)
	}
	return out
}

// busiest is the 1-minute load average when the run started, before it
// put any load of its own on the machine: other programs' share of it.
func (r *Report) busiest() float64 {
	var one float64
	if len(r.Loads) > 0 {
		if _, err := fmt.Sscan(r.Loads[0].LoadAvg, &one); err != nil {
			return 0
		}
	}
	return one
}

// WriteTable prints the side-by-side table, the load averages and the
// bandwidth lines.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "troupe vs llama.cpp, same weights (%s), %d threads, %s\n", r.Models.Name, r.Threads, r.Host)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tunit\ttroupe\tllama.cpp\tratio\tspread troupe\tspread llama.cpp\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.Metric, row.Unit, num(row.Troupe), num(row.Llama),
			ratio(row.Speedup()), pct(row.TroupeSpread), pct(row.LlamaSpread))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("ratio = times faster troupe is: troupe/llama.cpp for tok/s and req/s, llama.cpp/troupe for ms; > 1 means troupe wins\n")
	b.WriteString("spread = (max-min)/median of the repetitions behind a median\n")
	if bw := r.Bandwidth; bw != nil && r.Kernels != nil {
		fmt.Fprintf(&b, "memory copy (%d MiB): %.1f GB/s with 1 thread, %.1f GB/s with %d (best of %d; bytes copied per second)\n",
			bw.Copy.Bytes>>20, bw.Copy.Best1/1e9, bw.Copy.BestN/1e9, bw.Copy.Threads, len(bw.Copy.SamplesN))
		if ref := max(bw.Copy.Best1, bw.Copy.BestN); ref > 0 {
			fmt.Fprintf(&b, "decode @ depth 0 weight reads: troupe %.1f GB/s (%.0f MB × %.1f tok/s, %.0f%% of copy), llama.cpp %.1f GB/s (%.0f MB × %.1f tok/s, %.0f%% of copy)\n",
				bw.TroupeBytesPerS/1e9, float64(bw.TroupeWeightBytes)/1e6, r.Kernels.TroupeDecode0, 100*bw.TroupeBytesPerS/ref,
				bw.LlamaBytesPerS/1e9, float64(bw.LlamaWeightBytes)/1e6, r.Kernels.LlamaDecode0, 100*bw.LlamaBytesPerS/ref)
		}
	}
	for _, m := range r.allLoads() {
		fmt.Fprintf(&b, "load average %-24s %s\n", m.At+":", m.LoadAvg)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// JSON is the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return append(b, '\n'), nil
}

func num(v float64) string {
	switch {
	case !(v > 0):
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func pct(v float64) string {
	if !(v > 0) {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func ratio(v float64) string {
	if !(v > 0) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}
