// Package fsutil holds the two durable-file steps every store of Sluice
// takes (partition checkpoints, the metadata store, the raft log): replace
// a file atomically, and make a directory's entries durable.
package fsutil

import (
	"os"
	"path/filepath"
)

// TmpSuffix ends the temporary file WriteFileAtomic writes first; a crash
// can leave one behind, and recovery removes it.
const TmpSuffix = ".tmp"

// WriteFileAtomic replaces path with data durably: write path+TmpSuffix,
// fsync it, rename it over path, fsync the directory. A crash leaves the
// old file or the new one, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes renames, creations and removals in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
