package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Modes of the files opctl writes when it creates them. A file that is
// replaced keeps its own permission bits (never loosened).
const (
	// modeShared is for plans and targets: they hold no credential (URLs
	// are written without theirs, docs/repair.md).
	modeShared fs.FileMode = 0o644
	// modePrivate is for a configuration, which may hold a DSN password.
	modePrivate fs.FileMode = 0o600
)

// atomicFile is how opctl writes every file it writes (a plan file,
// plans.jsonl, a targets file, a configuration): the bytes go to a
// temporary file in the destination's directory, and Commit renames it over
// the destination once it is complete. Until then, and for good after
// Abort, an interrupt or a crash, the destination keeps its old content (or
// stays absent): nobody ever reads a truncated file or a half-written last
// line. A crash (SIGKILL) can leave the temporary file,
// ".<name>.tmp-<random>", next to the destination.
//
// A destination that exists and is a stream (a named pipe, /dev/stdout, a
// shell's process substitution >(...), a terminal) cannot be replaced: it
// is written directly, opened without blocking (a pipe no process reads is
// an error at once, never a hang). The last component of the path is never
// followed to a file: a symbolic link there is written through only when
// it leads to a stream (/dev/stdout is one), and is refused otherwise —
// anyone able to write in a shared directory can plant a link to another
// user's file. The temporary file is made in the destination's own
// directory, and the rename replaces the name given, never a link's target.
type atomicFile struct {
	f *os.File
	// dest is the file Commit replaces.
	dest string
	mode fs.FileMode
	// direct: f is the destination itself (a stream).
	direct    bool
	noClobber bool
	done      bool
}

// createAtomic starts writing path; a new file gets mode. With noClobber,
// an existing path is an error wrapping fs.ErrExist, checked here and again
// by Commit.
func createAtomic(path string, mode fs.FileMode, noClobber bool) (*atomicFile, error) {
	a := &atomicFile{dest: path, mode: mode, noClobber: noClobber}
	fi, err := os.Lstat(path)
	switch {
	case err == nil && noClobber:
		return nil, fmt.Errorf("%s: %w", path, fs.ErrExist)
	case err == nil && !fi.Mode().IsRegular():
		return a.openStream(fi)
	case err == nil:
		// Replacing needs only the directory's permission: refuse a file
		// this user could not write in place, as os.Create would (opened
		// without following a link or blocking, should it change since).
		f, err := os.OpenFile(path, os.O_WRONLY|oNoFollow|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, err
		}
		f.Close()
		a.mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("cannot create a temporary file in %s to write %s: %w", dir, path, err)
	}
	a.f = f
	return a, nil
}

// openStream opens the destination, which exists and is not a regular
// file (fi: what Lstat saw), to write it directly when it is a stream;
// anything else is refused.
func (a *atomicFile) openStream(fi fs.FileInfo) (*atomicFile, error) {
	link := fi.Mode()&fs.ModeSymlink != 0
	flags := os.O_WRONLY | syscall.O_NONBLOCK
	if !link {
		flags |= oNoFollow
	}
	f, err := os.OpenFile(a.dest, flags, 0)
	switch {
	case errors.Is(err, syscall.ENXIO):
		return nil, fmt.Errorf("%s is a named pipe no process reads: start the reader first", a.dest)
	case errors.Is(err, fs.ErrNotExist) && link:
		return nil, fmt.Errorf("%s is a symbolic link to nothing: opctl does not write through a link (remove it, or give the path of the file to write)", a.dest)
	case err != nil:
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Mode().Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeCharDevice) != 0 {
		a.f, a.direct = f, true
		return a, nil
	}
	f.Close()
	if err != nil {
		return nil, err
	}
	if link {
		return nil, fmt.Errorf("%s is a symbolic link: opctl does not write through a link to a file, which anyone who can write in its directory may have planted (remove it, or give the path of the file to write)", a.dest)
	}
	return nil, fmt.Errorf("%s is %s, not a file opctl can write", a.dest, st.Mode().Type())
}

// Write writes to the temporary file.
func (a *atomicFile) Write(p []byte) (int, error) { return a.f.Write(p) }

// Commit makes what was written the destination's content: synced, given
// its mode, then renamed over it. On an error the temporary file is removed
// and the destination is as it was. Commit after Commit or Abort does
// nothing.
func (a *atomicFile) Commit() error {
	if a.done {
		return nil
	}
	a.done = true
	if a.direct {
		return a.f.Close()
	}
	tmp := a.f.Name()
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, a.mode)
	}
	if err == nil {
		err = a.rename(tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// rename moves tmp to the destination; with noClobber, never over a file
// that appeared since createAtomic (a hard link fails if it exists).
func (a *atomicFile) rename(tmp string) error {
	if !a.noClobber {
		return os.Rename(tmp, a.dest)
	}
	err := os.Link(tmp, a.dest)
	switch {
	case err == nil:
		return os.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s: %w", a.dest, fs.ErrExist)
	}
	// No hard links on this file system: check, then rename.
	if _, serr := os.Lstat(a.dest); serr == nil {
		return fmt.Errorf("%s: %w", a.dest, fs.ErrExist)
	}
	return os.Rename(tmp, a.dest)
}

// Abort drops what was written: the temporary file is removed and the
// destination is left as it was. Abort after Commit does nothing (defer it).
func (a *atomicFile) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	if !a.direct {
		os.Remove(a.f.Name())
	}
}

// writeFileAtomic writes path in one go through an atomicFile (see there):
// write's output, buffered, replaces path only when write and the commit
// succeed.
func writeFileAtomic(path string, mode fs.FileMode, write func(io.Writer) error) error {
	a, err := createAtomic(path, mode, false)
	if err != nil {
		return err
	}
	defer a.Abort()
	w := bufio.NewWriter(a)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return a.Commit()
}
