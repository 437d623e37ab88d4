-- required_fine: the fine fit bucket of a required amount, for ix_tasks_fit_fine.
--
-- Exact below 512; above, 256 buckets per doubling (the eight bits after the
-- leading one), monotone in r, at most 6143. A boundary bucket of
-- required_bucket (four per doubling) splits into 64 of these, so a claim
-- that must search it reads each whole one's best task in one probe and
-- walks only the one that holds `available`: 1/256 of a doubling wide. An
-- index expression, not a column, so adding it rewrote no table.
CREATE OR REPLACE FUNCTION required_fine(r integer) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN r < 512 THEN r
            ELSE 256 * (25 - position('1' IN r::bit(32)::text))
                 + (r >> (24 - position('1' IN r::bit(32)::text))) - 256
       END;
