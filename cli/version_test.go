package cli

// What `ce version` says: the linker's stamp (a release) wins over the
// build information Go records (a clone, go install …@vX).

import (
	"runtime/debug"
	"testing"
)

func TestVersionStamp(t *testing.T) {
	cases := []struct {
		name                    string
		stampVersion, stampRev  string
		wantVersion, notVersion string
		wantRevision            string
	}{
		{"no_stamp_reads_the_build_information", "", "", "", "v1.2.3", ""},
		{"stamped_version_wins", "v1.2.3", "", "v1.2.3", "", ""},
		{"stamped_commit_wins", "v1.2.3", "0123456789abcdef", "v1.2.3", "", "0123456789abcdef"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oldV, oldC := stampedVersion, stampedCommit
			t.Cleanup(func() { stampedVersion, stampedCommit = oldV, oldC })
			stampedVersion, stampedCommit = c.stampVersion, c.stampRev
			b := readBuildInfo()
			if c.wantVersion != "" && b.Version != c.wantVersion {
				t.Fatalf("version %q, want the stamp %q", b.Version, c.wantVersion)
			}
			if c.notVersion != "" && b.Version == c.notVersion {
				t.Fatalf("version %q without a stamp", b.Version)
			}
			if b.Version == "" || b.Go == "" {
				t.Fatalf("empty version or go: %+v", b)
			}
			if c.wantRevision != "" && b.Revision != c.wantRevision {
				t.Fatalf("revision %q, want the stamp %q", b.Revision, c.wantRevision)
			}
			if version() != b.Version {
				t.Fatalf("the room announces %q, ce version says %q", version(), b.Version)
			}
		})
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want buildInfo
	}{
		{"devel_stays_dev", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, buildInfo{Version: "dev"}},
		{"module_version_is_used", debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, buildInfo{Version: "v0.4.0"}},
		{"vcs_settings_give_the_revision", debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			buildInfo{Version: "dev", Revision: "abc", Modified: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fromBuildInfo(buildInfo{Version: "dev"}, &c.bi); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
