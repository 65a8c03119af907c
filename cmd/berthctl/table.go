package main

// The output every operator subcommand shares: an aligned table by default, or
// with -o json the exact data the daemon answered, pretty-printed. Tables never
// colour anything and never leave a cell empty ("-"), so `awk '{print $3}'`
// keeps working and columns do not collapse.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// outputFlag registers -o on fs.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", outputTable, "output: table or json")
}

func checkOutput(o string) error {
	if o != outputTable && o != outputJSON {
		return fmt.Errorf("-o must be %s or %s, not %q", outputTable, outputJSON, o)
	}
	return nil
}

// parseView parses an operator view's command line: fs's own flags, -o, and
// exactly positional arguments (anything else is usage). asJSON is -o json.
func parseView(fs *flag.FlagSet, args []string, positional int, usage string) (rest []string, asJSON bool, err error) {
	output := outputFlag(fs)
	if rest, err = parseWithArgs(fs, args); err != nil {
		return nil, false, err
	}
	if len(rest) != positional {
		return nil, false, errors.New(usage)
	}
	if err := checkOutput(*output); err != nil {
		return nil, false, err
	}
	return rest, *output == outputJSON, nil
}

// view is the command of an operator view with no flags but -o and no
// arguments: the debug read model at uri, as print tabulates it.
func view[T any](name, uri string, print func(*client, T) error) func(*client, []string) error {
	return func(c *client, args []string) error {
		_, asJSON, err := parseView(flag.NewFlagSet(name, flag.ContinueOnError), args, 0, "usage: berthctl "+name+" [-o table|json]")
		if err != nil {
			return err
		}
		return showDebug(c, uri, asJSON, func(page T) error { return print(c, page) })
	}
}

// parseWithArgs parses fs allowing positional arguments before, between and
// after flags (`lease <uuid> -o json` as well as `lease -o json <uuid>`): the
// flag package alone stops at the first positional one.
func parseWithArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// table is a tabwriter with berthctl's conventions: two spaces between columns,
// "-" for an empty cell, and cells kept on one line with single spaces inside,
// so a run of two spaces always separates columns.
type table struct {
	w *tabwriter.Writer
}

func newTable(out io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) { t.indentedRow(0, cells...) }

// indentedRow is a row whose first cell is indented by depth levels (the actor
// tree); the indentation is part of the cell, so the columns still align.
func (t *table) indentedRow(depth int, cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	cells[0] = strings.Repeat("  ", depth) + cells[0]
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// cell is s on one line with single spaces (error texts and summaries carry
// newlines and tabs), or "-" when there is nothing to show.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	return s
}

// writeJSON prints v indented; a json.RawMessage inside stays the daemon's own
// bytes, in the daemon's field order, only re-indented.
func writeJSON(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return writeRawJSON(out, b)
}

// writeRawJSON re-indents a JSON answer exactly as the daemon sent it.
func writeRawJSON(out io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("the answer is not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := out.Write(b.Bytes())
	return err
}

// age renders a duration the way an operator scans a table: at most two units,
// "45s", "12m3s", "5h2m", "3d4h".
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", s/3600, (s%3600)/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, (s%86400)/3600)
}

// ageSeconds is age for the *_seconds fields of the read model.
func ageSeconds(s float64) string { return age(time.Duration(s * float64(time.Second))) }

// timestamp is a time in UTC to the second; the zero time is "-".
func timestamp(t time.Time) string { return inUTC(t, time.RFC3339) }

// timestampMilli is timestamp to the millisecond, for journal events and
// transitions, several of which often fall within one second.
func timestampMilli(t time.Time) string { return inUTC(t, "2006-01-02T15:04:05.000Z07:00") }

func inUTC(t time.Time, layout string) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(layout)
}

func optionalTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return timestamp(*t)
}

// byteSize renders n bytes in binary units: "512 B", "12.0 KiB", "3.4 GiB".
func byteSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.1f %s", f, unit)
}

// budget is the terminal budget verdict with its streak, "retry (1)".
func budget(b messages.TerminalBudget) string {
	if b.Verdict == "" {
		return "-"
	}
	return fmt.Sprintf("%s (%d)", b.Verdict, b.ConsecutiveFailures)
}

// itemsSummary is a lease's items as "web×2,db×1"; an unnamed lone item is
// service "app" (CONTRACT.md).
func itemsSummary(items []messages.DebugItem) string {
	parts := make([]string, 0, len(items))
	for _, it := range items {
		name := it.ServiceName
		if name == "" {
			name = "app"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, it.Quantity))
	}
	return strings.Join(parts, ",")
}

// portsSummary renders published ports like docker ps, "32768->8080/tcp",
// ordered by container port, joined by ",".
func portsSummary(ports map[string]messages.PortBinding) string {
	return strings.Join(portList(ports), ",")
}

func portList(ports map[string]messages.PortBinding) []string {
	parts := make([]string, 0, len(ports))
	for _, k := range slices.Sorted(maps.Keys(ports)) {
		if p := ports[k]; p.HostPort != "" {
			parts = append(parts, p.HostPort+"->"+k)
		} else {
			parts = append(parts, k)
		}
	}
	return parts
}

// countsSummary is a count per kind as "lifecycle:2,operation:1", by kind.
func countsSummary(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, counts[k]))
	}
	return strings.Join(parts, ",")
}

// shortID is a container ID as docker ps shows it.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
