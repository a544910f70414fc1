package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/commonroom/ce/httpapi"
	"github.com/commonroom/ce/room"
)

// ownerPath is the operator credential file of a served room. Whoever can
// read it is the local operator: the same trust as the document itself.
func ownerPath(docPath string) string { return docPath + ".commonroom.owner" }

// ownerFile is what a serving room tells local `ce` commands.
type ownerFile struct {
	PID           int    `json:"pid"`
	WorkspaceID   string `json:"workspace_id"`
	OwnerURL      string `json:"owner_url"` // base URL of the owner listener (no key)
	IngressURL    string `json:"ingress_url"`
	OperatorToken string `json:"operator_token"`
	// Transport is how other machines reach the room (nil: loopback, as
	// written by a ce before transports).
	Transport *ownerTransport `json:"transport,omitempty"`
}

// ownerTransport is the exposed way in as `ce status` shows it.
type ownerTransport struct {
	Type      string `json:"type"`
	Mode      string `json:"mode"`
	Encrypted bool   `json:"encrypted"`
	Describe  string `json:"describe"`
}

func newOwnerTransport(h room.Hint) *ownerTransport {
	return &ownerTransport{Type: h.Type, Mode: h.Mode, Encrypted: h.Encrypted, Describe: showHint(h)}
}

func newOperatorToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "op_" + base64.RawURLEncoding.EncodeToString(b)
}

// writeOwnerFile writes the credential with mode 0600, atomically, so a
// reader never sees half of it.
func writeOwnerFile(docPath string, of ownerFile) error {
	b, err := json.Marshal(of)
	if err != nil {
		return err
	}
	dst := ownerPath(docPath)
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".commonroom.owner.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

func readOwnerFile(docPath string) (ownerFile, error) {
	var of ownerFile
	b, err := os.ReadFile(ownerPath(docPath))
	if err != nil {
		return of, err
	}
	if err := json.Unmarshal(b, &of); err != nil {
		return of, err
	}
	if of.OwnerURL == "" || of.OperatorToken == "" {
		return of, errors.New("incomplete credential file")
	}
	return of, nil
}

// ownerClient talks to a running room's owner listener as the operator.
type ownerClient struct {
	of   ownerFile
	http *http.Client
	// participant, when set, asks the room to act as that participant
	// rather than as the host (ce task-cancel --participant).
	participant string
}

func newOwnerClient(of ownerFile) *ownerClient {
	return &ownerClient{of: of, http: &http.Client{Timeout: 30 * time.Second}}
}

// call sends one request and decodes a 2xx answer into out; a non-2xx answer
// becomes the room's own error.
func (c *ownerClient) call(ctx context.Context, method, path string, body any, out any) error {
	var hdr http.Header
	if c.participant != "" {
		hdr = http.Header{actAsHeader: {c.participant}}
	}
	return callRoomHeader(ctx, c.http, method, c.of.OwnerURL+path, c.of.OperatorToken, hdr, body, out)
}

// actAsHeader lets the local operator act as one participant; the room
// honours it only with the operator credential on the owner listener.
const actAsHeader = httpapi.ActAsHeader

func callRoom(ctx context.Context, hc *http.Client, method, url, token string, body any, out any) error {
	return callRoomHeader(ctx, hc, method, url, token, nil, body, out)
}

func callRoomHeader(ctx context.Context, hc *http.Client, method, url, token string, hdr http.Header, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return room.Internal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return room.Internal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return room.Errorf(room.KindTransportUnavailable, "cannot reach the room: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 2_000_000))
	if err != nil {
		return room.Errorf(room.KindTransportUnavailable, "reading the room's answer: %v", err)
	}
	if resp.StatusCode/100 != 2 {
		return remoteError(resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return room.Errorf(room.KindInternal, "the room sent an answer ce cannot read")
	}
	return nil
}

// remoteError rebuilds a room error from its JSON body.
func remoteError(status int, body []byte) error {
	var eb map[string]any
	if err := json.Unmarshal(body, &eb); err != nil {
		return room.Errorf(room.KindInternal, "the room answered HTTP %d", status)
	}
	code, _ := eb["error"].(string)
	msg, _ := eb["message"].(string)
	if code == "" {
		return room.Errorf(room.KindInternal, "the room answered HTTP %d", status)
	}
	e := room.Errorf(room.Kind(code), "%s", msg)
	for k, v := range eb {
		if k != "error" && k != "message" {
			e.With(k, v)
		}
	}
	return e
}

// servingRoom reports the running room for docPath, if one holds the lock.
// With no room serving it returns the writer lock, which the caller holds
// while it runs the engine in-process and then releases.
func servingRoom(docPath string) (*ownerClient, *room.WriterLock, error) {
	lock, err := room.AcquireWriterLock(docPath)
	if err == nil {
		return nil, lock, nil
	}
	if !errors.Is(err, room.ErrLocked) {
		return nil, nil, err
	}
	of, ferr := readOwnerFile(docPath)
	if ferr != nil {
		return nil, nil, room.Errorf(room.KindRoomBusy,
			"%v, but its operator credential (%s) cannot be read: %v", err, ownerPath(docPath), ferr)
	}
	return newOwnerClient(of), nil, nil
}

// processAlive reports whether pid names a live process (a credential left
// by a killed room names a dead one).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func describeServing(of ownerFile) string {
	return fmt.Sprintf("room %s served by pid %d at %s", of.WorkspaceID, of.PID, of.OwnerURL)
}
