-- required_bucket: the fit bucket of a required amount, for ix_tasks_fit.
--
-- Exact below 16; above, four buckets per doubling (the two bits after the
-- leading one), so any 32-bit value falls in one of 124 buckets whatever the
-- unit (cores, MB, millicores). Every task of a bucket below the one that
-- holds `available` fits, so a claim reads each such bucket's best task in
-- one index probe and never enumerates distinct required values. Stored in
-- tasks.bucket (a generated column), so nothing writes it but PostgreSQL.
CREATE OR REPLACE FUNCTION required_bucket(r integer) RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN r < 16 THEN r::smallint
            ELSE (4 * (32 - position('1' IN r::bit(32)::text)) + ((r >> (30 - position('1' IN r::bit(32)::text))) & 3))::smallint
       END;
