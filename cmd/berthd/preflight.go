package main

import (
	"context"
	"io"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// preflightTimeout bounds the whole read (seed: -storage-identity-operation-timeout,
// default 10m); a timeout is a failure, never proof of anything.
const preflightTimeout = 10 * time.Minute

// runPreflight is `berthd -config C -preflight-storage-identity-adoption -v013-dir D`:
// it judges the fred v0.13 host berthd would take over and prints the report,
// ending with takeover.ReadyLine exactly when nothing is refused (exit 0; else 1).
// It writes nothing: not the data dir, not fred's files, not Docker.
func runPreflight(cfg *config.Config, fredDir string, requireDrained, asJSON bool, stdout io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), preflightTimeout)
	defer cancel()
	// An engine only lists here; it needs an installation ID to exist, and
	// fred's objects carry none (nothing is made under this one).
	eng, err := engine.New(engine.Options{Host: cfg.DockerHost, BackendName: cfg.Name, InstallationID: "fred-v013-preflight"})
	if err != nil {
		return printRefusal(stdout, takeover.DockerUnavailable, err)
	}
	defer eng.Close()
	r := takeover.Preflight(ctx, takeover.Inputs{
		FredDir: fredDir, DataDir: cfg.DataDir, ListenAddr: cfg.ListenAddr, VolumeRoot: cfg.VolumeDataPath,
		Objects: eng.FredV013Objects, Now: time.Now(),
		Rules: takeover.Rules{Backend: cfg.Name, CallbackMaxAge: cfg.CallbackMaxAge, RequireDrained: requireDrained,
			ResolveSKU: func(sku string) bool {
				if mapped, ok := cfg.SKUMapping[sku]; ok {
					sku = mapped
				}
				_, ok := cfg.SKUProfiles[sku]
				return ok
			},
			Admit: func(raw []byte, items []messages.LeaseItem) error {
				_, err := manifest.Build(raw, items, manifest.Options{AllowedRegistries: cfg.AllowedRegistries})
				return err
			}},
	})
	if asJSON {
		r.PrintJSON(stdout)
	} else {
		r.Print(stdout)
	}
	if !r.Ready() {
		return exitRuntime
	}
	return exitOK
}

func printRefusal(w io.Writer, code string, err error) int {
	(&takeover.Report{Host: []takeover.Finding{{Code: code, Detail: err.Error()}}}).Print(w)
	return exitRuntime
}
