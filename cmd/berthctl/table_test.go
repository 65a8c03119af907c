package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestAge_TwoUnitsAtMost(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 59 * time.Second: "59s", 61 * time.Second: "1m1s",
		3599 * time.Second: "59m59s", 3*time.Hour + 2*time.Minute + 9*time.Second: "3h2m",
		49 * time.Hour: "2d1h",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestByteSize_BinaryUnits(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 2 << 40: "2.0 TiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTable_CellsStayOnOneLineAndNeverEmpty(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "A", "B")
	tb.row("", "two\nlines\tand  spaces")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	wantText(t, b.String(), "A  B\n-  two lines and spaces\n")
}

func TestParseWithArgs_FlagsAnywhere(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o := fs.String("o", "table", "")
	rest, err := parseWithArgs(fs, []string{"a", "-o", "json", "b"})
	if err != nil || *o != "json" || strings.Join(rest, ",") != "a,b" {
		t.Fatalf("%q %q %v", rest, *o, err)
	}
}
