package nodestore

import "github.com/cubefleet/cubefleet/internal/nodes"

// The journal's internals, for the tests of package nodestore_test.
type (
	JournalRecord = journalRecord
	JournalJoin   = journalJoin
)

// MinJournalCols is minJournalCols.
const MinJournalCols = minJournalCols

// JournalRow is reg's registration row as replica holder writes it.
func JournalRow(reg nodes.Registration, holder string) []any { return registrationRow(&reg, holder) }

// AppendJournal appends recs to the journal at path, as Journal does, and closes it.
func AppendJournal(path string, recs ...JournalRecord) error {
	j := &journal{path: path}
	defer j.close()
	for _, rec := range recs {
		if err := j.append(rec); err != nil {
			return err
		}
	}
	return nil
}

// Others reports whether s saw other replicas announce themselves.
func Others(s *Store) bool { return s.others.Load() }

// Retry hands st to s's next flush as the statuses of a flush that failed: the registry marks
// those nodes again and the flush writes their current status.
func Retry(s *Store, st []nodes.Status) {
	s.flushMu.Lock()
	s.retry = st
	s.flushMu.Unlock()
}
