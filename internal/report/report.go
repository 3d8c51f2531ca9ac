// Package report renders an orchestrate.Report: the tables printed on
// stdout, results.json, results.csv, report.md and SVG charts (gonum/plot).
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/orchestrate"
)

// Files written by Write, in order.
const (
	JSONFile     = "results.json"
	CSVFile      = "results.csv"
	MarkdownFile = "report.md"
	CPUChart     = "cpu.svg"
	LatencyChart = "latency.svg"
	RSSChart     = "rss.svg"
	// StepChart is the name pattern (fmt, the step's index) of the chart
	// of one step second by second: step-03.svg.
	StepChart = "step-%02d.svg"
)

// Write writes every output file into dir (created if missing) and returns
// their paths. Each file is written whole or not at all (a temporary file
// renamed into place); the files of an earlier report in dir that this one
// does not have (a step's chart) are removed, other files left alone.
func Write(dir string, rep *orchestrate.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var paths []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		if err := WriteFile(p, fn); err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
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
	if err := write(MarkdownFile, func(w io.Writer) error { return markdown(w, rep, dir, charts) }); err != nil {
		return paths, err
	}
	if err := clearStale(dir, paths); err != nil {
		return paths, fmt.Errorf("report: clearing an earlier report: %w", err)
	}
	return paths, nil
}

// JSON writes the report as indented JSON.
func JSON(w io.Writer, rep *orchestrate.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// csvHeader is results.csv's header: one row per step. Columns are only
// ever appended, so that positional readers keep working. envelopes is
// every envelope the upstream received (Relay's own metric and outcome
// flushes included), forwarded the data envelopes among them; catch_up_s
// is −1 when forwarding never settled; target_rate 0 is a closed-loop
// step of concurrency senders.
var csvHeader = []string{
	"step", "build", "round", "target_rate", "verdict", "reasons", "sent", "ok", "dropped", "achieved_rate", "accepted_rate",
	"p50_ms", "p90_ms", "p99_ms", "max_ms", "lag_p99_ms", "envelopes", "gap", "items_by_type", "outcomes",
	"idle_cores", "load_cores", "net_cores", "ms_per_envelope", "peak_rss_bytes", "rusage_maxrss_bytes",
	"ready_s", "drain_s", "shutdown_s", "shutdown_killed", "loadavg_before", "loadavg_after", "error",
	"forwarded", "forwarded_rate", "backlog_end", "backlog_growth_per_s", "catch_up_s", "rss_slope_mib_per_s",
	"cost_span_s", "cost_cpu_s", "cost_envelopes", "stopped_early", "concurrency",
	"harness_cores", "harness_share_pct", "harness_blast_cores", "harness_upstream_cores", "harness_scheduler_cores", "harness_other_cores",
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
			i(st.Upstream.Forwarded), g(st.Steady.ForwardedRate, 2), i(st.Steady.BacklogEnd), g(st.Steady.BacklogGrowth, 2),
			catchUpSecs(st.Steady.CatchUp), g(st.Steady.RSSSlope, 3),
			g(st.CPU.CostSpan.Seconds(), 3), g(st.CPU.CostCPUSecs, 4), i(st.CPU.CostEnvelopes), st.StoppedEarly, strconv.Itoa(st.Concurrency),
			g(st.CPU.HarnessCores, 4), g(st.CPU.HarnessShare, 2),
		}
		if h := st.CPU.HarnessSplit; h != nil {
			row = append(row, g(h.BlastCores, 4), g(h.UpstreamCores, 4), g(h.SchedulerCores, 4), g(h.OtherCores, 4))
		} else {
			row = append(row, "", "", "", "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// catchUpSecs is a catch-up time in seconds for results.csv, "-1" when
// forwarding never settled.
func catchUpSecs(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
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

// Table is a Markdown table that also reads well as plain text: columns
// are padded to equal width. NewTable takes the column headers; a header
// starting with '>' marks a right-aligned (numeric) column.
type Table struct {
	head  []string
	right []bool
	rows  [][]string
}

// NewTable starts a table with the given column headers.
func NewTable(cols ...string) *Table {
	t := &Table{}
	for _, c := range cols {
		// A leading '>' marks a right-aligned (numeric) column.
		r := strings.HasPrefix(c, ">")
		t.head = append(t.head, strings.TrimPrefix(c, ">"))
		t.right = append(t.right, r)
	}
	return t
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.rows = append(t.rows, cells) }

// Write writes the table.
func (t *Table) Write(w io.Writer) {
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

// Num formats a rate or count with thousands separators (− for negatives).
func Num(v float64) string {
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
	return Num(v)
}

// msUnit is ms(v) with its unit, "–" alone for none.
func msUnit(v float64) string {
	if v == 0 {
		return "–"
	}
	return ms(v) + " ms"
}

// mb formats bytes in MiB, or GiB from 1 GiB on.
func mb(b float64) string {
	switch {
	case b == 0:
		return "–"
	case b >= 1<<30:
		return strconv.FormatFloat(b/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) + " MiB"
}

// mibPerSec formats a memory slope, e.g. "+260 MiB/s", "−0.4 MiB/s".
func mibPerSec(v float64) string {
	prec := 1
	if math.Abs(v) >= 10 {
		prec = 0
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', prec, 64)
	switch {
	case strings.Trim(s, "0.") == "":
		return s + " MiB/s"
	case v < 0:
		return "−" + s + " MiB/s"
	}
	return "+" + s + " MiB/s"
}

// rateCell is a target rate in a table: "max" for a closed-loop step.
func rateCell(r float64) string {
	if r == orchestrate.RateMax {
		return "max"
	}
	return Num(r)
}

// catchUp formats the time from blast's end until the last envelope was
// forwarded; when forwarding never settled (d < 0) it says how long the
// drain waited ("> 20 s"), or "not settled" if that is unknown.
func catchUp(d, drained time.Duration) string {
	switch {
	case d >= 0:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case drained > 0:
		return "> " + strconv.FormatFloat(drained.Seconds(), 'f', 0, 64) + " s"
	}
	return "not settled"
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
