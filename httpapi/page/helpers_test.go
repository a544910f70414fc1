package page_test

import "github.com/commonroom/ce/internal/roomtest"

// The kit's names for what the page's tests share with the other doors'.
const ownerCookie = roomtest.OwnerCookie

var serverPort = roomtest.ServerPort
