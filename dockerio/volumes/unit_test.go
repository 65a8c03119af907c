package volumes

import (
	"slices"
	"testing"
)

func TestValidName_ManagedGrammarOnly(t *testing.T) {
	const u = "0b7e5b4e-6d0f-4c1a-9b9a-3f1e2d3c4b5a"
	for _, ok := range []string{
		"fred-" + u + "-app-0", "fred-" + u + "-web-api-12", "fred-retained-" + u + "-db-3", "fred-" + u + "-a1-0",
	} {
		if !ValidName(ok) {
			t.Errorf("ValidName(%q) = false, want true", ok)
		}
	}
	for _, bad := range []string{
		"", "fred-", "app", "fred-" + u, "fred-" + u + "-app", "fred-" + u + "-app-01", "fred-" + u + "-App-0",
		"fred-0B7E5B4E-6D0F-4C1A-9B9A-3F1E2D3C4B5A-app-0", "fred-" + u + "-app-0/..", "fred-" + u + "-app-0/x",
		"../fred-" + u + "-app-0", "fred-" + u + "--0", "fred-" + u + "-app--0", "fred-" + u + "-app-0 ",
		"fred-retained-retained-" + u + "-app-0", "fred-" + u + "-app-" + "1234567",
	} {
		if ValidName(bad) {
			t.Errorf("ValidName(%q) = true, want false", bad)
		}
	}
}

func TestParseQgroupTable_ByHeader_LimitsNoneAndPathWithSpaces(t *testing.T) {
	// v6.2 prints no newline after the last row.
	text := "Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path \n" +
		"--------    ----------    ---------  --------------  -------------   ---- \n" +
		"0/5              16384        16384            none           none   <toplevel>\n" +
		"0/256         16760832     16760832        16777216           none   exp/fred-a\n" +
		"0/268                0            0            none           none   <stale>\n" +
		"0/270             4096         4096         1048576           none   my dir/fred-b"
	rows, err := parseQgroupTable(text)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows["0/256"]; r.Referenced != 16760832 || r.Exclusive != 16760832 || r.MaxRfer != 16777216 || r.MaxExcl != -1 || r.Path != "exp/fred-a" {
		t.Errorf("0/256 = %+v", r)
	}
	if r := rows["0/5"]; r.MaxRfer != -1 || r.Path != "<toplevel>" {
		t.Errorf("0/5 = %+v", r)
	}
	if r := rows["0/270"]; r.Path != "my dir/fred-b" || r.MaxRfer != 1<<20 {
		t.Errorf("0/270 = %+v", r)
	}
	if len(rows) != 4 {
		t.Errorf("%d rows, want 4", len(rows))
	}

	// -p -c add columns before Path: still read by name.
	withParents := "Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive Parent   Child   Path \n" +
		"--------    ----------    ---------  --------------  ------------- ------   -----   ---- \n" +
		"0/257          4210688      4210688         8388608           none -        -       exp/fred-b\n"
	rows, err = parseQgroupTable(withParents)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows["0/257"]; r.Referenced != 4210688 || r.MaxRfer != 8388608 || r.Path != "exp/fred-b" {
		t.Errorf("0/257 with parents = %+v", r)
	}

	for name, bad := range map[string]string{
		"no header":   "ERROR: can't list qgroups: quotas not enabled\n",
		"human units": "Qgroupid    Referenced    Exclusive   Path\n--------    ----------    ---------   ----\n0/5  16.00KiB  16.00KiB  <toplevel>\n",
		"short row":   "Qgroupid    Referenced    Exclusive   Path\n--------    ----------    ---------   ----\n0/5  16384\n",
	} {
		if _, err := parseQgroupTable(bad); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestParseSubvolumeList_PathsRelativeToTopLevel(t *testing.T) {
	text := "ID 256 gen 18 top level 5 path exp/fred-a\nID 264 gen 25 top level 263 path exp/fred-h/data/nested dir\n" +
		"ID 300 gen 30 top level 5 path <FS_TREE>/x\n"
	got, err := parseSubvolumeList(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []subvolume{{256, 5, "exp/fred-a"}, {264, 263, "exp/fred-h/data/nested dir"}, {300, 5, "x"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseSubvolumeList("something else\n"); err == nil {
		t.Error("a foreign line parsed")
	}
}

func TestParseMountinfo_FieldsEscapesAndSubvolID(t *testing.T) {
	text := "44 27 0:39 / /var/lib/berth-ci/btrfs rw,relatime shared:3 - btrfs /dev/loop0 rw,discard=async,space_cache=v2,subvolid=5,subvol=/\n" +
		"1240 1223 0:39 /exp/fred-k/data /data rw,relatime - btrfs /dev/loop0 rw,space_cache=v2,subvolid=268,subvol=/exp/fred-k\n" +
		"50 27 0:40 / /mnt/with\\040space rw - tmpfs none rw\n"
	table, err := parseMountinfo(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 3 {
		t.Fatalf("%d entries", len(table))
	}
	if m := table[1]; m.Root != "/exp/fred-k/data" || m.MountPoint != "/data" || m.Dev != "0:39" || m.subvolID() != 268 || m.FSType != "btrfs" {
		t.Errorf("container mount = %+v (subvolid %d)", m, m.subvolID())
	}
	if m := table[2]; m.MountPoint != "/mnt/with space" || m.subvolID() != 0 {
		t.Errorf("escaped = %+v", m)
	}
	if m, ok := table.holding("/var/lib/berth-ci/btrfs/vols/x"); !ok || m.ID != 44 {
		t.Errorf("holding = %+v %v", m, ok)
	}
	if _, ok := table.at("/var/lib/berth-ci"); ok {
		t.Error("a non-mount-point found as a mount")
	}
	if _, err := parseMountinfo("1 2 3\n"); err == nil {
		t.Error("malformed line accepted")
	}
}

func TestMissingCaps_ReadsCapEff(t *testing.T) {
	all := "Name:\tberthd\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n"
	if m, err := missingCaps(all, capSysAdmin, capChown); err != nil || len(m) != 0 {
		t.Errorf("full caps: missing %v, %v", m, err)
	}
	onlyChown := "CapEff:\t0000000000000001\n"
	if m, err := missingCaps(onlyChown, capSysAdmin, capChown); err != nil || !slices.Equal(m, []string{"CAP_SYS_ADMIN"}) {
		t.Errorf("chown only: missing %v, %v", m, err)
	}
	if _, err := missingCaps("Name:\tx\n", capChown); err == nil {
		t.Error("no CapEff line accepted")
	}
}

func TestCheckSubdir_OneElementOnly(t *testing.T) {
	for _, ok := range []string{"data", "var%2Flib%2Fx", "a.b"} {
		if err := checkSubdir(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "/data", "x\x00"} {
		if checkSubdir(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
