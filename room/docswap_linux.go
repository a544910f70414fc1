//go:build linux

package room

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchangeFiles swaps the files named a and b in one step
// (renameat2 RENAME_EXCHANGE): both names exist throughout and neither
// file is ever unlinked by the swap, so the file that was at b can be read
// — and checked for an edit that slipped in — after it left b. It returns
// errNoExchange where the kernel or the filesystem lacks the call.
func exchangeFiles(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoExchange
	}
	return err
}
