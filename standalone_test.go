package cubefleet_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// outside is the folder beside the repository that no file of it may refer to: a reader of the
// code does not have it, so what the code relies on is written in docs/. (Spelled in two parts
// so that this file does not refer to it either.)
var outside = []byte(".." + "/shared")

// sectionSign starts a citation of a numbered section (the sign, then a number such as 4.2):
// the documents numbered so are
// not in the repository, and the project's own docs/ cite their headings instead.
var sectionSign = []byte("\u00a7")

// outsideDocuments are the file names of the product documents kept beside the repository
// (spelled in two parts, as outside is), and issueNumber the way a work item beside it is named:
// neither is a thing a reader of the repository can open.
var (
	outsideDocuments = [][]byte{[]byte("ionos-cube-fleet" + ".md"), []byte("cube-multi-node" + ".md"), []byte("cubesandbox-node-agent" + ".md"), []byte("fleet-config" + ".md"), []byte("ionos-api" + ".md"), []byte("anchors" + ".md")}
	issueNumber      = regexp.MustCompile(`\b[Ii]ssue` + ` [0-9]`)
)

// notInRepository are the folders that git ignores (.gitignore) or keeps its own data in: what a
// developer has there locally is no file of the repository.
var notInRepository = map[string]bool{".git": true, ".cubefleet": true, ".private": true, "bin": true, "rapid": true}

// TestNoFileRefersOutsideTheRepository: no file of the repository (code, comments, docs, tests,
// scripts, test data) cites a file outside it, or a numbered section (sectionSign) of a
// document it does not hold; the project's own docs/ say what it needs.
func TestNoFileRefersOutsideTheRepository(t *testing.T) {
	read := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && notInRepository[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		read++
		for line, rest := 1, data; ; line++ {
			l, next, more := bytes.Cut(rest, []byte("\n"))
			if bytes.Contains(l, outside) {
				t.Errorf("%s:%d refers to %s, which is not part of the repository: cite the project's own docs/ (write what is missing there)", path, line, outside)
			}
			for _, doc := range outsideDocuments {
				if bytes.Contains(l, doc) {
					t.Errorf("%s:%d cites %s, which is not in the repository: cite docs/ (a page and its heading) or state the fact in place", path, line, doc)
				}
			}
			if issueNumber.Match(l) {
				t.Errorf("%s:%d cites a numbered work item that is not in the repository: say what the code or test holds instead", path, line)
			}
			if i := bytes.Index(l, sectionSign); i >= 0 && i+len(sectionSign) < len(l) && l[i+len(sectionSign)] >= '0' && l[i+len(sectionSign)] <= '9' {
				t.Errorf("%s:%d cites a numbered section of a document that is not in the repository: cite docs/ (a page and its heading) or state the fact in place", path, line)
			}
			if !more {
				break
			}
			rest = next
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 100 {
		t.Fatalf("read only %d files: the test does not run in the repository's root", read)
	}
}
