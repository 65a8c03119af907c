package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/persistence"
)

// Every container, network and Docker volume berthd makes carries its
// installation's label (fred.installation_id). A berthd whose data dir is gone
// leaves its objects in Docker for good, and Docker carries them on every
// operation (one machine held 384 idle pool networks of 22 installations), so
// doctor reports the objects of installations other than its own and
// prune-installations removes a dead one's idle objects when an operator asks.
//
// An installation is live, and nothing of it is touched, when any of:
//   - a process on this host holds the daemon.lock of a data dir whose storage
//     identity names it (read from the kernel's lock table, never by taking a lock);
//   - any of its containers is running (or paused, restarting);
//   - any of its objects is younger than the minimum age (a daemon starting, or
//     one whose lock this host cannot see).
//
// Otherwise it is dead. Of a dead installation only idle objects go: stopped
// containers (without their volumes), networks nothing is attached to, and
// volumes no container mounts. Docker refuses the rest anyway, as nothing is forced.

// installationObject is one Docker object of an installation.
type installationObject struct {
	Kind    string    `json:"kind"` // container, network, volume
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Busy    string    `json:"busy,omitempty"` // why it is not idle: "running", "attached", "mounted"
}

// installationInventory is what Docker holds of one installation.
type installationInventory struct {
	ID      string               `json:"installation_id"`
	Live    string               `json:"live,omitempty"` // why it is live; "" when dead
	Objects []installationObject `json:"objects"`
}

// counts returns how many objects of each kind it holds, and how many of them are busy.
func (inv installationInventory) counts() (n, busy map[string]int) {
	n, busy = map[string]int{}, map[string]int{}
	for _, o := range inv.Objects {
		n[o.Kind]++
		if o.Busy != "" {
			busy[o.Kind]++
		}
	}
	return n, busy
}

// summary is one line: counts by kind with their busy ones, and the ages.
func (inv installationInventory) summary(now time.Time) string {
	n, busy := inv.counts()
	var parts []string
	for _, k := range []string{"container", "network", "volume"} {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %ss (%d %s)", n[k], k, busy[k], map[string]string{"container": "running", "network": "attached", "volume": "mounted"}[k]))
		}
	}
	oldest, newest := now, time.Time{}
	for _, o := range inv.Objects {
		oldest, newest = minTime(oldest, o.Created), maxTime(newest, o.Created)
	}
	state := "dead"
	if inv.Live != "" {
		state = "live: " + inv.Live
	}
	return fmt.Sprintf("%s %s, ages %s to %s (%s)", inv.ID, strings.Join(parts, ", "),
		now.Sub(newest).Round(time.Second), now.Sub(oldest).Round(time.Second), state)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// dockerContainer, dockerNetwork and dockerVolume are the parts of Docker's
// list answers the inventory reads.
type dockerContainer struct {
	ID      string            `json:"Id"`
	Names   []string          `json:"Names"`
	State   string            `json:"State"`
	Created int64             `json:"Created"`
	Labels  map[string]string `json:"Labels"`
	Mounts  []struct {
		Type string `json:"Type"`
		Name string `json:"Name"`
	} `json:"Mounts"`
	NetworkSettings struct {
		Networks map[string]struct {
			NetworkID string `json:"NetworkID"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

type dockerNetwork struct {
	ID         string            `json:"Id"`
	Name       string            `json:"Name"`
	Created    time.Time         `json:"Created"`
	Labels     map[string]string `json:"Labels"`
	Containers map[string]any    `json:"Containers"`
}

type dockerVolume struct {
	Name      string            `json:"Name"`
	CreatedAt time.Time         `json:"CreatedAt"`
	Labels    map[string]string `json:"Labels"`
}

// labelled is the filter query of every object carrying an installation label.
var labelled = "?filters=" + url.QueryEscape(`{"label":{"`+dockerio.LabelInstallation+`":true}}`)

// inventoryInstallations lists the objects of every installation but own ("":
// none excluded), judged against the live installations of this host and the
// minimum age. Every container (any installation, or none) counts for what
// is attached to a network or mounts a volume.
func inventoryInstallations(ctx context.Context, d *dockerAPI, own string, live map[string]string, minAge time.Duration, now time.Time) ([]installationInventory, error) {
	var cs []dockerContainer
	var ns []dockerNetwork
	var vs struct{ Volumes []dockerVolume }
	if err := d.get(ctx, "/containers/json?all=1", &cs); err != nil {
		return nil, err
	}
	if err := d.get(ctx, "/networks"+labelled, &ns); err != nil {
		return nil, err
	}
	if err := d.get(ctx, "/volumes"+labelled, &vs); err != nil {
		return nil, err
	}
	attached, mounted := map[string]bool{}, map[string]bool{}
	for _, c := range cs {
		for _, ep := range c.NetworkSettings.Networks {
			attached[ep.NetworkID] = true
		}
		for _, m := range c.Mounts {
			if m.Type == "volume" {
				mounted[m.Name] = true
			}
		}
	}
	byID := map[string]*installationInventory{}
	add := func(labels map[string]string, o installationObject) {
		id := labels[dockerio.LabelInstallation]
		if id == "" || id == own {
			return
		}
		if byID[id] == nil {
			byID[id] = &installationInventory{ID: id}
		}
		byID[id].Objects = append(byID[id].Objects, o)
	}
	for _, c := range cs {
		o := installationObject{Kind: "container", ID: c.ID, Name: strings.TrimPrefix(strings.Join(c.Names, ","), "/"), Created: time.Unix(c.Created, 0)}
		if c.State != "exited" && c.State != "created" && c.State != "dead" {
			o.Busy = c.State
		}
		add(c.Labels, o)
	}
	for _, n := range ns {
		o := installationObject{Kind: "network", ID: n.ID, Name: n.Name, Created: n.Created}
		if attached[n.ID] {
			o.Busy = "attached"
		}
		add(n.Labels, o)
	}
	for _, v := range vs.Volumes {
		o := installationObject{Kind: "volume", ID: v.Name, Name: v.Name, Created: v.CreatedAt}
		if mounted[v.Name] {
			o.Busy = "mounted"
		}
		add(v.Labels, o)
	}
	out := make([]installationInventory, 0, len(byID))
	for _, inv := range byID {
		inv.Live = liveness(*inv, live, minAge, now)
		out = append(out, *inv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// liveness says why an installation is live, "" when it is dead.
func liveness(inv installationInventory, live map[string]string, minAge time.Duration, now time.Time) string {
	if why, ok := live[inv.ID]; ok {
		return why
	}
	for _, o := range inv.Objects {
		if o.Kind == "container" && o.Busy != "" {
			return "container " + o.Name + " is " + o.Busy
		}
	}
	for _, o := range inv.Objects {
		if now.Sub(o.Created) < minAge {
			return fmt.Sprintf("%s %s is younger than %s", o.Kind, o.Name, minAge)
		}
	}
	return ""
}

// liveInstallations finds the installations whose data dir's daemon.lock a
// process on this host holds: each holder of a lock in the kernel's lock table
// that has a daemon.lock open, confirmed by persistence.ReadLockHolder. unseen
// names the lock holders whose open files this user cannot read (run as root to
// see every one): their installations cannot be told live.
func liveInstallations() (live map[string]string, unseen []int, err error) {
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, nil, fmt.Errorf("read the kernel's lock table: %w", err)
	}
	live = map[string]string{}
	seen := map[int]bool{}
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		pid, _ := strconv.Atoi(f[4])
		if pid <= 0 || seen[pid] {
			continue
		}
		seen[pid] = true
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			if !os.IsNotExist(err) {
				unseen = append(unseen, pid)
			}
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err != nil || filepath.Base(target) != "daemon.lock" {
				continue
			}
			dir := filepath.Dir(target)
			if h, err := persistence.ReadLockHolder(dir); err == nil && h.Held {
				if id := markerInstallation(dir); id != "" {
					live[id] = fmt.Sprintf("pid %d holds %s", h.PID, h.Path)
				}
			}
		}
	}
	return live, unseen, nil
}

// markerInstallation reads the installation ID a data dir's storage identity
// names ("" when none can be read).
func markerInstallation(dataDir string) string {
	raw, err := os.ReadFile(filepath.Join(dataDir, "storage-identity"))
	if err != nil {
		return ""
	}
	var marker struct {
		InstallationID string `json:"installation_id"`
	}
	if json.Unmarshal(raw, &marker) != nil {
		return ""
	}
	return marker.InstallationID
}

// checkInstallations reports the objects Docker holds of installations other
// than this data dir's: a dead one's idle objects are a warning, removed only
// by prune-installations.
func checkInstallations(ctx context.Context, env *doctorEnv) checkResult {
	const name = "installations"
	if env.docker == nil || env.info == nil {
		return notChecked(name)
	}
	ctx, cancel := context.WithTimeout(ctx, dockerTimeout)
	defer cancel()
	live, unseen, err := liveInstallations()
	if err != nil {
		return warn(name, "not checked: "+err.Error(), "")
	}
	minAge := env.minAge
	if minAge == 0 {
		minAge = defaultMinAge
	}
	now := time.Now()
	invs, err := inventoryInstallations(ctx, env.docker, markerInstallation(env.cfg.DataDir), live, minAge, now)
	if err != nil {
		return warn(name, "not checked: "+err.Error(), "")
	}
	if len(invs) == 0 {
		return ok(name, "Docker holds no object of another installation")
	}
	lines, dead := make([]string, 0, len(invs)), 0
	for _, inv := range invs {
		lines = append(lines, inv.summary(now))
		if inv.Live == "" {
			dead++
		}
	}
	finding := fmt.Sprintf("Docker holds objects of %d other installations (%d dead): %s", len(invs), dead, strings.Join(lines, "; "))
	if len(unseen) > 0 {
		finding += fmt.Sprintf("; lock holders %v cannot be read by this user, so an installation of theirs may show as dead", unseen)
	}
	if dead == 0 {
		return ok(name, finding)
	}
	return warn(name, finding, "berthctl prune-installations lists the dead installations' idle objects; with -yes it removes them")
}
