// Package report renders an orchestrate.Report: the tables printed on
// stdout, results.json, results.csv, report.md and SVG charts (gonum/plot).
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/orchestrate"
)

// Files written by Write, in order.
const (
	JSONFile     = "results.json"
	CSVFile      = "results.csv"
	MarkdownFile = "report.md"
	CPUChart     = "cpu.svg"
	LatencyChart = "latency.svg"
	RSSChart     = "rss.svg"
)

// Write writes every output file into dir (created if missing) and returns
// their paths.
func Write(dir string, rep *orchestrate.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var paths []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("report: %s: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		paths = append(paths, p)
		return nil
	}
	if err := write(JSONFile, func(w io.Writer) error { return JSON(w, rep) }); err != nil {
		return paths, err
	}
	if err := write(CSVFile, func(w io.Writer) error { return CSV(w, rep) }); err != nil {
		return paths, err
	}
	charts, err := Charts(dir, rep)
	paths = append(paths, charts...)
	if err != nil {
		return paths, err
	}
	if err := write(MarkdownFile, func(w io.Writer) error { return Markdown(w, rep, charts) }); err != nil {
		return paths, err
	}
	return paths, nil
}

// JSON writes the report as indented JSON.
func JSON(w io.Writer, rep *orchestrate.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// csvHeader is results.csv's header: one row per step.
var csvHeader = []string{
	"step", "build", "round", "target_rate", "verdict", "reasons", "sent", "ok", "dropped", "achieved_rate", "accepted_rate",
	"p50_ms", "p90_ms", "p99_ms", "max_ms", "lag_p99_ms", "forwarded", "gap", "items_by_type", "outcomes",
	"idle_cores", "load_cores", "net_cores", "ms_per_envelope", "peak_rss_bytes", "rusage_maxrss_bytes",
	"ready_s", "drain_s", "shutdown_s", "shutdown_killed", "loadavg_before", "loadavg_after", "error",
}

// CSV writes one row per step.
func CSV(w io.Writer, rep *orchestrate.Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	g := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, st := range rep.Steps {
		row := []string{
			strconv.Itoa(st.Index), st.Build, strconv.Itoa(st.Round), f(st.Rate), st.Verdict, strings.Join(st.Reasons, "; "),
			i(st.Sent), i(st.OK), i(st.Dropped), g(st.AchievedRate, 2), g(st.AcceptedRate, 2),
			g(st.Latency.P50, 3), g(st.Latency.P90, 3), g(st.Latency.P99, 3), g(st.Latency.Max, 3), g(st.LagP99, 3),
			i(st.Upstream.Envelopes), i(st.Upstream.Gap), kv(st.Upstream.ItemsByType), outcomes(st),
			g(st.CPU.IdleCores, 4), g(st.CPU.LoadCores, 4), g(st.CPU.NetCores, 4), g(st.CPU.MsPerEnv, 4),
			strconv.FormatUint(st.Memory.PeakRSS, 10), strconv.FormatUint(st.Memory.RusageMaxRSS, 10),
			g(st.ReadyAfter.Seconds(), 3), g(st.Drain.Took.Seconds(), 3), g(st.Shutdown.Took.Seconds(), 3),
			strconv.FormatBool(st.Shutdown.Killed), g(st.LoadAvg[0], 2), g(st.LoadAvg[1], 2), st.Error,
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// kv renders a count map as "a=1 b=2", sorted by key.
func kv(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// outcomes renders the step's outcome rows as "outcome/category/reason=quantity".
func outcomes(st *orchestrate.Step) string {
	var parts []string
	for _, o := range st.Upstream.Outcomes {
		name := o.Outcome + "/" + o.Category
		if o.Reason != "" {
			name += "/" + o.Reason
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, o.Quantity))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// table is a Markdown table that also reads well as plain text: columns are
// padded to equal width.
type table struct {
	head  []string
	right []bool
	rows  [][]string
}

func newTable(cols ...string) *table {
	t := &table{}
	for _, c := range cols {
		// A leading '>' marks a right-aligned (numeric) column.
		r := strings.HasPrefix(c, ">")
		t.head = append(t.head, strings.TrimPrefix(c, ">"))
		t.right = append(t.right, r)
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = max(3, len([]rune(h)))
	}
	for _, r := range t.rows {
		for i, c := range r {
			if n := len([]rune(c)); i < len(width) && n > width[i] {
				width[i] = n
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range t.head {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if t.right[i] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.head)
	var b strings.Builder
	b.WriteString("|")
	for i := range t.head {
		d := strings.Repeat("-", width[i])
		if t.right[i] {
			d = d[:len(d)-1] + ":"
		}
		b.WriteString(" " + d + " |")
	}
	fmt.Fprintln(w, b.String())
	for _, r := range t.rows {
		line(r)
	}
}

// num formats a rate or count with thousands separators.
func num(v float64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatFloat(v, 'f', 0, 64)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "−" + b.String()
	}
	return b.String()
}

func ms(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return num(v)
}

func mb(b float64) string {
	if b == 0 {
		return "–"
	}
	return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) + " MB"
}

func cores(c float64) string { return strconv.FormatFloat(c, 'f', 3, 64) }

func pct(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	if v > 0 {
		return "+" + s + "%"
	}
	if v < 0 {
		return "−" + strings.TrimPrefix(s, "-") + "%"
	}
	return "±0%"
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }

// who names the measured process.
func who(rep *orchestrate.Report) string {
	if rep.Harness {
		return "harness"
	}
	return "Relay"
}
