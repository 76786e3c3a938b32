-- +goose Up
-- runs_as: the id the sandbox's node knows it by. It is the sandbox's own id, but for a warm
-- sandbox a waiting create claimed: that row takes the create's id (the id the create answered)
-- and keeps the warm sandbox's in runs_as (docs/sandboxes.md, "Warm pools"). Rows of such claims
-- made before (claimed_for set) are renamed to the create's id the same way, with their output
-- and assignments.
ALTER TABLE sandboxes ADD COLUMN runs_as TEXT NOT NULL DEFAULT '';
UPDATE sandboxes SET runs_as = id;
UPDATE sandboxes_output SET sandbox_id = (SELECT s.claimed_for FROM sandboxes s WHERE s.id = sandboxes_output.sandbox_id)
    WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE claimed_for <> '');
UPDATE sandboxes_assignments SET sandbox_id = (SELECT s.claimed_for FROM sandboxes s WHERE s.id = sandboxes_assignments.sandbox_id)
    WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE claimed_for <> '');
UPDATE sandboxes SET id = claimed_for WHERE claimed_for <> '';
DROP INDEX sandboxes_claimed_for;
ALTER TABLE sandboxes DROP COLUMN claimed_for;
CREATE INDEX sandboxes_runs_as ON sandboxes (runs_as);

-- +goose Down
DROP INDEX sandboxes_runs_as;
ALTER TABLE sandboxes ADD COLUMN claimed_for TEXT NOT NULL DEFAULT '';
UPDATE sandboxes SET claimed_for = id WHERE runs_as <> id;
CREATE INDEX sandboxes_claimed_for ON sandboxes (claimed_for);
ALTER TABLE sandboxes DROP COLUMN runs_as;
