-- +goose Up
-- score is the decision's score in [0,1]: a retry of the request answered from its reservation,
-- after a replica took the lease over too, returns the decision as it was made.
ALTER TABLE scheduler_reservations ADD COLUMN score DOUBLE PRECISION NOT NULL DEFAULT 0;
-- +goose Down
ALTER TABLE scheduler_reservations DROP COLUMN score;
