package engine

import (
	"context"
	"testing"

	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// countingAPI stands for Docker under composeAPI: it counts what reaches it.
type countingAPI struct {
	client.APIClient
	lists, inspects int
}

func (c *countingAPI) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	c.lists++
	return nil, nil
}

func (c *countingAPI) NetworkInspect(context.Context, string, network.InspectOptions) (network.Inspect, error) {
	c.inspects++
	return network.Inspect{}, nil
}

func (c *countingAPI) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	c.lists++
	return nil, nil
}

// Compose's questions inside a launch are answered from its facts, once for the
// project listing; any other question, or any question outside a launch, reaches
// Docker.
func TestComposeAPI_AnswersOnlyWhatTheLaunchEstablished(t *testing.T) {
	docker := &countingAPI{}
	c := &composeAPI{APIClient: docker, images: &imageCache{}}
	verified := network.Inspect{ID: "abc123", Name: "fred-l"}
	project := "fred-l"
	ours := container.Summary{ID: "c1", Labels: map[string]string{api.ConfigHashLabel: "h", api.OneoffLabel: "False"}}
	oneOff := container.Summary{ID: "c2", Labels: map[string]string{api.ConfigHashLabel: "h", api.OneoffLabel: "True"}}
	ctx := withLaunchFacts(context.Background(), &launchFacts{network: verified, project: project,
		listing: []container.Summary{ours, oneOff}})

	byName := network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "abc123"))}
	if got, _ := c.NetworkList(ctx, byName); len(got) != 1 || got[0].ID != "abc123" {
		t.Fatalf("list of the verified network = %+v", got)
	}
	if n, _ := c.NetworkInspect(ctx, "abc123", network.InspectOptions{}); n.ID != "abc123" {
		t.Fatalf("inspect of the verified network = %+v", n)
	}
	_, _ = c.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "other"))})
	_, _ = c.NetworkInspect(ctx, "abc", network.InspectOptions{}) // a prefix is not the ID
	_, _ = c.NetworkList(context.Background(), byName)            // outside a launch
	if docker.lists != 2 || docker.inspects != 1 {
		t.Fatalf("reached Docker: %d lists, %d inspects; want 2, 1", docker.lists, docker.inspects)
	}

	listing := func(labels ...string) container.ListOptions {
		var kv []filters.KeyValuePair
		for _, l := range labels {
			kv = append(kv, filters.Arg("label", l))
		}
		return container.ListOptions{All: true, Filters: filters.NewArgs(kv...)}
	}
	got, _ := c.ContainerList(ctx, listing(api.ProjectLabel+"="+project, api.ConfigHashLabel))
	if len(got) != 2 || docker.lists != 2 {
		t.Fatalf("compose's first project listing = %d containers (Docker lists %d), want both from the facts", len(got), docker.lists)
	}
	_, _ = c.ContainerList(ctx, listing(api.ProjectLabel+"="+project, api.ConfigHashLabel, api.OneoffLabel+"=False"))
	if docker.lists != 3 {
		t.Fatal("a second project listing (after compose created something) must reach Docker")
	}
	fresh := withLaunchFacts(context.Background(), &launchFacts{network: verified, project: project, listing: []container.Summary{ours, oneOff}})
	if got, _ := c.ContainerList(fresh, listing(api.ProjectLabel+"="+project, api.ConfigHashLabel, api.OneoffLabel+"=False")); len(got) != 1 || got[0].ID != "c1" {
		t.Fatalf("one-off excluded listing = %+v", got)
	}
	_, _ = c.ContainerList(withLaunchFacts(context.Background(), &launchFacts{project: project}), listing(api.ProjectLabel+"=fred-other", api.ConfigHashLabel))
	if docker.lists != 4 {
		t.Fatal("another project's listing must reach Docker")
	}
}
