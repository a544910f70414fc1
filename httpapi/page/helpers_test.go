package page_test

import (
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// The kit's names for what the page's tests share with the other doors'.
func ownerCookie(h *apitest.Harness) string { return roomtest.OwnerCookie(h.Eng.WorkspaceID) }

var serverPort = roomtest.ServerPort
