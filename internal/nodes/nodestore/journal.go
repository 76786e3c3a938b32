package nodestore

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// journal is the registrations' write-ahead file (Config.JournalPath). A registration the
// database has not taken within the registry's wait (a long fleet apply holds SQLite's write
// lock, or the database does not answer) is appended here and synced to disk before it is
// answered, so a crash before the flusher writes it loses nothing: Open replays the file into
// the database.
// A flush that commits everything journaled so far empties the file.
//
// Each line is one journalRecord. Only a line that was synced was ever answered, so a torn
// last line (a crash mid-append) is ignored on replay.
type journal struct {
	path     string
	mu       sync.Mutex
	f        *os.File // nil until the first append after the file was emptied
	appended uint64   // records appended since the journal was opened
	cleared  uint64   // appended as of the last time the file was emptied
}

// journalRecord is one journaled registration: its nodes_registrations row (the values of
// registrationCols, in order; the writer column is replaced on replay) and, for a join, the
// join token use it spends.
type journalRecord struct {
	Row  []any        `json:"row"`
	Join *journalJoin `json:"join,omitempty"`
}

// journalJoin is the join token use of a journaled join: the token's id and the caller's IP.
type journalJoin struct {
	TokenID string `json:"token_id"`
	IP      string `json:"ip"`
}

// mark returns the count of records appended so far; a flush reads it before it takes its
// batch, so every record up to the mark is in that batch (or was written before).
func (j *journal) mark() uint64 {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.appended
}

// append writes rec as one line and syncs it (and, for a new file, its directory). The file is
// created with mode 0600: it holds credential hashes.
func (j *journal) append(rec journalRecord) error {
	if j == nil {
		return nodes.ErrNoJournal
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if err := syncDir(filepath.Dir(j.path)); err != nil {
			f.Close()
			return err
		}
		j.f = f
	}
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	j.appended++
	return nil
}

// written tells the journal that a flush which read mark before taking its batch committed:
// when nothing was appended since, every journaled registration is in the database and the
// file is emptied.
func (j *journal) written(mark uint64) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.appended != mark || j.cleared == mark {
		return nil
	}
	return j.clear()
}

// clear empties the journal. Requires j.mu.
func (j *journal) clear() error {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	if err := os.Remove(j.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	j.cleared = j.appended
	return nil
}

// close closes the journal's file (the file stays for the next start to replay).
func (j *journal) close() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// syncDir makes a new file's directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", dir, err)
	}
	return nil
}

// readJournal reads the records of the journal at path (none when it does not exist). A
// torn or unreadable line is skipped and counted in bad.
func readJournal(path string) (recs []journalRecord, bad int, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("journal: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var rec journalRecord
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil || len(rec.Row) < minJournalCols || len(rec.Row) > len(registrationCols) {
			bad++
			continue
		}
		if rec.Row, err = rowFromJSON(rec.Row); err != nil {
			bad++
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("journal %s: %w", path, err)
	}
	return recs, bad, nil
}

// minJournalCols is the length of a journaled row written before the columns migrations added
// since 0001 (drain_*, cordon_by, drain_deadline): a journal an older server left is replayed, those columns
// empty.
const minJournalCols = 13

// rowFromJSON turns a decoded row (strings and json.Numbers) back into registrationCols'
// types: string for text, int64 otherwise. A shorter row (an older server's) gets the missing
// trailing columns as "" or 0.
func rowFromJSON(row []any) ([]any, error) {
	out := make([]any, len(registrationCols))
	for i, c := range registrationCols {
		if i >= len(row) {
			out[i] = ""
			if c.typ != "text" {
				out[i] = int64(0)
			}
			continue
		}
		switch v := row[i].(type) {
		case string:
			if c.typ != "text" {
				return nil, fmt.Errorf("column %s: want a number", c.name)
			}
			out[i] = v
		case json.Number:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || c.typ == "text" {
				return nil, fmt.Errorf("column %s: want %s", c.name, c.typ)
			}
			out[i] = n
		default:
			return nil, fmt.Errorf("column %s: unexpected %T", c.name, v)
		}
	}
	return out, nil
}

// Column positions in a registration row (registrationCols).
var (
	regColNodeID    = regCol("node_id")
	regColUpdatedAt = regCol("updated_at")
	regColWriter    = regCol("writer")
)

func regCol(name string) int {
	for i, c := range registrationCols {
		if c.name == name {
			return i
		}
	}
	panic("nodes: no registration column " + name)
}

// Journal appends a committed registration to the journal and syncs it to disk (nodes.Store):
// the database is busy, and the registration is to be answered. nodes.ErrNoJournal without a
// journal.
func (s *Store) Journal(reg nodes.Registration, join *nodes.JoinUse) error {
	rec := journalRecord{Row: registrationRow(&reg, s.holder)}
	if join != nil {
		rec.Join = &journalJoin{TokenID: join.TokenID, IP: join.IP}
	}
	return s.jnl.append(rec)
}

// replayJournal writes the registrations of Config.JournalPath that the database does not
// hold yet (a crash came before the flusher), in one transaction, then empties the journal.
// A record is skipped when the database already has that node's registration as new or newer,
// when the node was deleted at or after it, or when its join token has no use left (another
// replica spent it first). Open calls it before it loads the nodes.
func (s *Store) replayJournal(ctx context.Context) error {
	recs, bad, err := readJournal(s.jnl.path)
	if err != nil {
		return err
	}
	if bad > 0 {
		s.log.Warn("skipped unreadable lines of the node registration journal (a crash while one was written; it was never answered)", "lines", bad, "path", s.jnl.path)
	}
	replayed, skipped := 0, 0
	if len(recs) > 0 {
		err = s.db.InTx(ctx, func(tx *sql.Tx) error {
			replayed, skipped = 0, 0
			for _, rec := range recs {
				ok, err := s.replayOne(ctx, tx, rec)
				if err != nil {
					return err
				}
				if ok {
					replayed++
				} else {
					skipped++
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("replay the node registration journal %s: %w", s.jnl.path, err)
		}
	}
	if replayed > 0 || skipped > 0 {
		s.log.Info("replayed the node registration journal", "written", replayed, "already_written", skipped)
	}
	s.jnl.mu.Lock()
	defer s.jnl.mu.Unlock()
	return s.jnl.clear()
}

// replayOne writes one journaled registration unless the database has it (or something newer),
// with the node.joined event the crash lost when the node is new.
func (s *Store) replayOne(ctx context.Context, tx *sql.Tx, rec journalRecord) (bool, error) {
	id, _ := rec.Row[regColNodeID].(string)
	at, _ := rec.Row[regColUpdatedAt].(int64)
	var known, newer int
	err := tx.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM nodes_registrations WHERE node_id = $1),
		(SELECT count(*) FROM nodes_registrations WHERE node_id = $1 AND updated_at >= $2) +
		(SELECT count(*) FROM nodes_deleted WHERE node_id = $1 AND at >= $2)`, id, at).Scan(&known, &newer)
	if err != nil {
		return false, fmt.Errorf("node %s: %w", id, err)
	}
	if newer > 0 {
		return false, nil
	}
	if rec.Join != nil {
		used, err := useJoinToken(ctx, tx, rec.Join.TokenID, rec.Join.IP)
		if err != nil {
			return false, err
		}
		if !used {
			s.log.Warn("a journaled join's token was used up by another replica; the registration is dropped", "node", id, "join_token", rec.Join.TokenID)
			return false, nil
		}
	}
	rec.Row[regColWriter] = s.holder
	if err := s.bulkUpsert(ctx, tx, "nodes_registrations", registrationCols, nil, [][]any{rec.Row}); err != nil {
		return false, err
	}
	if known > 0 || s.reg == nil {
		return true, nil
	}
	reg := nodes.Registration{NodeID: id, UpdatedAt: at}
	reg.HostIP, _ = rec.Row[regCol("host_ip")].(string)
	reg.PoolID, _ = rec.Row[regCol("pool_id")].(string)
	reg.ClusterLabel, _ = rec.Row[regCol("cluster_label")].(string)
	reg.Agent, _ = rec.Row[regCol("agent")].(string)
	return true, events.Append(ctx, tx, s.reg.JoinedEvent(reg))
}
