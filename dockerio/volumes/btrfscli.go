package volumes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// btrfsCLI runs the btrfs command line tool; berth links no btrfs library (no
// cgo), and the CLI is what operators use too.
type btrfsCLI struct {
	bin string
}

// cmdError is a failed btrfs command: its arguments, how it failed and what it
// printed on stderr (kept whole: classification reads it).
type cmdError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *cmdError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = "no output"
	}
	return fmt.Sprintf("btrfs %s: %v: %s", strings.Join(e.Args, " "), e.Err, msg)
}

func (e *cmdError) Unwrap() error { return e.Err }

// maxCLIOutput bounds what one btrfs command may print (a qgroup table of many
// thousands of volumes is far below it).
const maxCLIOutput = 32 << 20

// cappedBuffer keeps at most maxCLIOutput bytes and drops the rest.
type cappedBuffer struct {
	bytes.Buffer
	dropped bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxCLIOutput - b.Len(); room < len(p) {
		b.dropped = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// run executes btrfs with args under ctx and returns its stdout and stderr.
// LC_ALL=C keeps messages in the English the classification matches.
func (c btrfsCLI) run(ctx context.Context, args ...string) (string, string, error) {
	if err := ctx.Err(); err != nil {
		return "", "", fmt.Errorf("btrfs %s: %w", strings.Join(args, " "), err)
	}
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin"}
	// A child that ignores the kill on ctx's end must not hold us forever.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr cappedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil && stdout.dropped {
		err = fmt.Errorf("output larger than %d bytes", maxCLIOutput)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.String(), stderr.String(), &cmdError{Args: args, Err: err, Stderr: stderr.String()}
	}
	return stdout.String(), stderr.String(), nil
}

// stderrSays reports whether err is a btrfs command failure whose stderr
// contains one of the phrases (case-insensitive).
func stderrSays(err error, phrases ...string) bool {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return false
	}
	s := strings.ToLower(ce.Stderr)
	for _, p := range phrases {
		if strings.Contains(s, strings.ToLower(p)) {
			return true
		}
	}
	return false
}

func isBusyErr(err error) bool {
	return stderrSays(err, "device or resource busy", "resource busy", "ebusy", "text file busy")
}

func isNotEmptyErr(err error) bool { return stderrSays(err, "directory not empty") }

func isNoEntErr(err error) bool { return stderrSays(err, "no such file or directory") }

// rootID is the subvolume ID of the subvolume path is in.
func (c btrfsCLI) rootID(ctx context.Context, path string) (uint64, error) {
	out, _, err := c.run(ctx, "inspect-internal", "rootid", path)
	if err != nil {
		return 0, err
	}
	id, perr := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if perr != nil {
		return 0, fmt.Errorf("btrfs inspect-internal rootid %s: unexpected output %q", path, strings.TrimSpace(out))
	}
	return id, nil
}

// subvolume is one line of `btrfs subvolume list`.
type subvolume struct {
	ID       uint64
	TopLevel uint64
	Path     string // relative to the filesystem's top-level subvolume
}

// subvolListLine: "ID 264 gen 25 top level 263 path exp/fred-h/data/nested".
var subvolListLine = regexp.MustCompile(`^ID (\d+) gen \d+ (?:cgen \d+ )?(?:parent \d+ )?top level (\d+) (?:parent_uuid \S+ )?(?:uuid \S+ )?path (.*)$`)

func parseSubvolumeList(text string) ([]subvolume, error) {
	var out []subvolume
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := subvolListLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("btrfs subvolume list: unexpected line %q", line)
		}
		id, _ := strconv.ParseUint(m[1], 10, 64)
		top, _ := strconv.ParseUint(m[2], 10, 64)
		out = append(out, subvolume{ID: id, TopLevel: top, Path: strings.TrimPrefix(m[3], "<FS_TREE>/")})
	}
	return out, nil
}

// listSubvolumes lists every subvolume of the filesystem path is on.
func (c btrfsCLI) listSubvolumes(ctx context.Context, path string) ([]subvolume, error) {
	out, _, err := c.run(ctx, "subvolume", "list", path)
	if err != nil {
		return nil, err
	}
	return parseSubvolumeList(out)
}

// qgroupRow is one row of `btrfs qgroup show -re --raw`.
type qgroupRow struct {
	ID         string // "0/257"
	Referenced int64
	Exclusive  int64
	MaxRfer    int64 // -1: none
	MaxExcl    int64 // -1: none
	Path       string
}

// parseQgroupTable reads the text table of `btrfs qgroup show --raw` by its
// header, so extra columns (-p, -c) or another order do not misread numbers:
//
//	Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path
//	--------    ----------    ---------  --------------  -------------   ----
//	0/5              16384        16384            none           none   <toplevel>
//
// Path is the last column and may hold spaces; every other column is one
// field. (v6.2's JSON output aborts when a limit is set, so text it is.)
func parseQgroupTable(text string) (map[string]qgroupRow, error) {
	lines := strings.Split(text, "\n")
	h, start, err := findQgroupHeader(text, lines)
	if err != nil {
		return nil, err
	}
	rows := map[string]qgroupRow{}
	for _, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "---") {
			continue
		}
		r, err := h.row(l)
		if err != nil {
			return nil, err
		}
		rows[r.ID] = r
	}
	return rows, nil
}

// qgroupHeader is the column layout of a `btrfs qgroup show` table.
type qgroupHeader struct {
	cols []string
	idx  map[string]int // lower-case column name → index
}

// findQgroupHeader reads the header among lines and returns the index of the
// line after it; the columns parseQgroupTable reads must be there.
func findQgroupHeader(text string, lines []string) (qgroupHeader, int, error) {
	h := qgroupHeader{idx: map[string]int{}}
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "Qgroupid") {
			// Two column names hold a space, and v6.2 pads some columns with one
			// space only: name those two as one word, then split on blanks.
			l = strings.NewReplacer("Max referenced", "Max_referenced", "Max exclusive", "Max_exclusive").Replace(l)
			h.cols = strings.Fields(l)
			for j := range h.cols {
				h.cols[j] = strings.ReplaceAll(h.cols[j], "_", " ")
			}
			start = i + 1
			break
		}
	}
	if start < 0 {
		return h, 0, fmt.Errorf("btrfs qgroup show: no header in output %q", firstLine(text))
	}
	for i, c := range h.cols {
		h.idx[strings.ToLower(c)] = i
	}
	for _, need := range []string{"qgroupid", "referenced", "exclusive"} {
		if _, ok := h.idx[need]; !ok {
			return h, 0, fmt.Errorf("btrfs qgroup show: header %q has no %s column", strings.Join(h.cols, " | "), need)
		}
	}
	return h, start, nil
}

// row reads one trimmed, non-empty row line; a byte count "none" or "-" is -1,
// as is one of a column the table lacks.
func (h qgroupHeader) row(l string) (qgroupRow, error) {
	f := strings.Fields(l)
	pathCol, hasPath := h.idx["path"]
	last := len(h.cols) - 1
	if hasPath && pathCol == last && len(f) >= last {
		if len(f) >= len(h.cols) {
			f = append(f[:last], strings.Join(f[last:], " "))
		} else {
			f = append(f, "") // an empty path
		}
	}
	if len(f) != len(h.cols) {
		return qgroupRow{}, fmt.Errorf("btrfs qgroup show: row %q does not match header %q", l, strings.Join(h.cols, " | "))
	}
	r := qgroupRow{ID: f[h.idx["qgroupid"]]}
	if hasPath {
		r.Path = f[pathCol]
	}
	for _, n := range []struct {
		col string
		to  *int64
	}{{"referenced", &r.Referenced}, {"exclusive", &r.Exclusive}, {"max referenced", &r.MaxRfer}, {"max exclusive", &r.MaxExcl}} {
		i, ok := h.idx[n.col]
		if !ok || f[i] == "none" || f[i] == "-" {
			*n.to = -1
			continue
		}
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return qgroupRow{}, fmt.Errorf("btrfs qgroup show: %s %q in row %q is not a byte count (--raw)", n.col, f[i], l)
		}
		*n.to = v
	}
	return r, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}

// qgroups reads every qgroup of the filesystem at path. With sync, the
// filesystem commits first, so the numbers are current rather than as of the
// last transaction commit (up to 30 s old). inconsistent reports btrfs'
// warning that the accounting needs a rescan.
func (c btrfsCLI) qgroups(ctx context.Context, path string, sync bool) (rows map[string]qgroupRow, inconsistent bool, err error) {
	args := []string{"qgroup", "show", "-re", "--raw"}
	if sync {
		args = append(args, "--sync")
	}
	out, stderr, err := c.run(ctx, append(args, path)...)
	if err != nil {
		return nil, false, err
	}
	rows, err = parseQgroupTable(out)
	if err != nil {
		return nil, false, err
	}
	warn := strings.ToLower(stderr)
	// "qgroup data inconsistent, rescan recommended"; "rescan is running, qgroup
	// data may be incorrect".
	return rows, strings.Contains(warn, "inconsistent") || strings.Contains(warn, "may be incorrect"), nil
}

func qgroupID(id uint64) string { return "0/" + strconv.FormatUint(id, 10) }
