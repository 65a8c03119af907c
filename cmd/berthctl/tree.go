package main

import (
	"strconv"
	"strings"

	"github.com/berth-dev/berth/messages"
)

// printTree is berthctl tree: the live actor tree (GET /debug/actors) as a
// table, one actor a row, indented under its parent in the order the parent
// lists its children (the root's are its spawn order).
func (c *client) printTree(root messages.NodeInfo) error {
	t := newTable(c.out, "ACTOR", "KIND", "STATUS", "MAILBOX", "RESTARTS", "IN-FLIGHT", "STATE")
	var walk func(n messages.NodeInfo, depth int)
	walk = func(n messages.NodeInfo, depth int) {
		t.indentedRow(depth, actorName(n.Path), n.Kind, n.Status, strconv.Itoa(n.MailboxDepth),
			strconv.Itoa(n.Restarts), strconv.Itoa(n.InFlight), n.State)
		for _, child := range n.Children {
			walk(child, depth+1)
		}
	}
	walk(root, 0)
	return t.flush()
}

// actorName is the last element of an actor's path ("lease-<uuid>" of
// "root/registry/lease-<uuid>"); the indentation shows the rest.
func actorName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }
