package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// prune-installations removes the idle Docker objects of dead installations
// (installations.go says what live and idle are). It only ever runs when an
// operator asks: by default it prints what it would remove; -yes removes it.
// Nothing is forced: a container that started or a network something joined
// since the look is refused by Docker and reported.

// defaultMinAge is how old an installation's newest object must be before it
// can count as dead: longer than any berthd start, so a daemon whose lock
// this host cannot see is not pruned while it fills its pool.
const defaultMinAge = time.Hour

// pruneTimeout bounds the whole command: a few hundred objects, one call each.
const pruneTimeout = 10 * time.Minute

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (c *client) pruneInstallations(args []string) error {
	fs := flag.NewFlagSet("prune-installations", flag.ContinueOnError)
	var only stringList
	fs.Var(&only, "installation", "only this installation (repeatable; default every dead one)")
	minAge := fs.Duration("min-age", defaultMinAge, "an installation with an object younger than this counts as live")
	yes := fs.Bool("yes", false, "remove (default: print what would be removed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *minAge < 0 {
		return errors.New("usage: berthctl prune-installations [-installation ID]... [-min-age D] [-yes]")
	}
	daemon := c.daemon
	if daemon == nil {
		var err error
		if daemon, err = loadDaemonConfig("", os.Environ()); err != nil {
			return err
		}
	}
	d, err := newDockerAPI(daemon.cfg.DockerHost)
	if err != nil {
		return err
	}
	own := markerInstallation(daemon.cfg.DataDir)
	if slices.Contains(only, own) && own != "" {
		return fmt.Errorf("installation %s is this config's own (data_dir %s): prune-installations never touches it", own, daemon.cfg.DataDir)
	}
	live, unseen, err := liveInstallations()
	if err != nil {
		return err
	}
	if *yes && len(unseen) > 0 {
		return fmt.Errorf("cannot tell which installations are live: the open files of lock holders %v are not readable by this user (run as root); nothing removed", unseen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pruneTimeout)
	defer cancel()
	invs, err := inventoryInstallations(ctx, d, own, live, *minAge, time.Now())
	if err != nil {
		return err
	}
	if invs, err = selectInstallations(invs, only); err != nil {
		return err
	}
	return c.prune(ctx, d, invs, *yes, unseen)
}

// selectInstallations keeps the named installations (all when none is named);
// a name Docker holds nothing of is an error, before anything is removed.
func selectInstallations(invs []installationInventory, only []string) ([]installationInventory, error) {
	if len(only) == 0 {
		return invs, nil
	}
	var out []installationInventory
	for _, id := range only {
		i := slices.IndexFunc(invs, func(inv installationInventory) bool { return inv.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("Docker holds no object of installation %q; nothing removed", id)
		}
		out = append(out, invs[i])
	}
	return out, nil
}

// prune prints each installation's verdict and each idle object of a dead one,
// removing them with yes.
func (c *client) prune(ctx context.Context, d *dockerAPI, invs []installationInventory, yes bool, unseen []int) error {
	now := time.Now()
	removed, failed := 0, 0
	for _, inv := range invs {
		fmt.Fprintf(c.out, "installation %s\n", inv.summary(now))
		if inv.Live != "" {
			continue
		}
		for _, kind := range []string{"container", "network", "volume"} {
			for _, o := range inv.Objects {
				if o.Kind != kind {
					continue
				}
				if o.Busy != "" {
					fmt.Fprintf(c.out, "  keep %s %s: %s\n", o.Kind, o.Name, o.Busy)
					continue
				}
				if !yes {
					fmt.Fprintf(c.out, "  would remove %s %s\n", o.Kind, o.Name)
					removed++
					continue
				}
				if err := removeIdle(ctx, d, o); err != nil {
					fmt.Fprintf(c.out, "  kept %s %s: %v\n", o.Kind, o.Name, err)
					failed++
					continue
				}
				fmt.Fprintf(c.out, "  removed %s %s\n", o.Kind, o.Name)
				removed++
			}
		}
	}
	switch {
	case !yes && len(unseen) > 0:
		fmt.Fprintf(c.out, "dry run: %d idle objects would be removed; lock holders %v cannot be read by this user, so -yes refuses (run as root)\n", removed, unseen)
	case !yes:
		fmt.Fprintf(c.out, "dry run: %d idle objects would be removed; -yes removes them\n", removed)
	default:
		fmt.Fprintf(c.out, "removed %d idle objects, %d refused\n", removed, failed)
	}
	if failed > 0 {
		return fmt.Errorf("%d objects could not be removed (listed above)", failed)
	}
	return nil
}

// removeIdle removes one object without force: a stopped container keeps its
// volumes; a network is looked at again first and kept when anything joined
// it. One already gone counts as removed.
func removeIdle(ctx context.Context, d *dockerAPI, o installationObject) error {
	var path string
	switch o.Kind {
	case "container":
		path = "/containers/" + o.ID + "?v=0&force=0"
	case "network":
		var n dockerNetwork
		if err := d.get(ctx, "/networks/"+o.ID, &n); err != nil {
			return ignoreGone(err)
		}
		if len(n.Containers) > 0 {
			return fmt.Errorf("%d containers joined it since the look", len(n.Containers))
		}
		path = "/networks/" + o.ID
	default:
		path = "/volumes/" + url.PathEscape(o.ID)
	}
	return ignoreGone(d.do(ctx, "DELETE", path, nil, nil))
}

// ignoreGone takes a 404 (removed by someone else meanwhile) as done.
func ignoreGone(err error) error {
	if err != nil && strings.Contains(err.Error(), "404 Not Found") {
		return nil
	}
	return err
}
