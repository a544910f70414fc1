package room

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"
)

// A loopback hint leads to the room only on the room's own machine: on any
// other, whatever listens on that port of the joiner's machine is a
// stranger. So an invitation's loopback hints carry a machine tag, and a
// joiner whose own tag for the same room differs never dials them
// (issue 25, item 2).
//
// The tag is not secret and names no machine: it is a hash of what tells
// one loopback from another — the machine id (/etc/machine-id, else
// /var/lib/dbus/machine-id) and the network namespace (a container with a
// network of its own has its own loopback) — together with the workspace id, so the same
// machine has unrelated tags in different rooms and a tag cannot follow a
// machine across rooms. Where neither can be read (no machine id, not
// Linux) there is no tag, and the hint is tried: the proven join keeps the
// secret from whatever answers there.

// HintParamMachine is the loopback hint's parameter that carries the tag.
const HintParamMachine = "machine"

// loopbackHintType mirrors transport.LoopbackName (room does not import
// the transports).
const loopbackHintType = "loopback"

// hostIdentity is what MachineTag hashes: the machine id and the network
// namespace (loopback belongs to a network namespace, not to a machine).
type hostIdentity struct{ machineID, netns string }

// readHostIdentity reads this process's machine id and network namespace.
func readHostIdentity() hostIdentity {
	var h hostIdentity
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" && len(id) <= 256 {
				h.machineID = id
				break
			}
		}
	}
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
		h.netns = ns
	}
	return h
}

// tag is the identity's tag for one room, "" when there is nothing to tell
// machines apart by.
func (h hostIdentity) tag(workspaceID string) string {
	if h.machineID == "" && h.netns == "" {
		return ""
	}
	sum := sha256.Sum256(frame("commonroom/machine/v1", h.machineID, h.netns, workspaceID))
	return hex.EncodeToString(sum[:16])
}

// MachineTag is this machine's tag for the room workspaceID: what a joiner
// compares with a loopback hint's HintParamMachine. "" when this machine
// has nothing to be told apart by.
func MachineTag(workspaceID string) string { return readHostIdentity().tag(workspaceID) }

// hostOnce reads the room's host identity once, at the first invitation.
type hostOnce struct {
	once sync.Once
	id   hostIdentity
}

func (h *hostOnce) get() hostIdentity {
	h.once.Do(func() { h.id = readHostIdentity() })
	return h.id
}

// inviteHints are the hints an invitation carries: the room's, with each
// loopback hint tagged with this machine (copies: the room's own hints are
// shared and never changed).
func (e *Engine) inviteHints() []Hint {
	hints := e.currentHints()
	tag := e.host.get().tag(e.WorkspaceID)
	out := make([]Hint, len(hints))
	for i, h := range hints {
		if h.Type == loopbackHintType && tag != "" {
			params := make(map[string]string, len(h.Params)+1)
			for k, v := range h.Params {
				params[k] = v
			}
			params[HintParamMachine] = tag
			h.Params = params
		}
		out[i] = h
	}
	return out
}
