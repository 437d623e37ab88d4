-- required_bucket: the fit bucket of a required amount, for ix_tasks_fit.
--
-- Exact below 16; above, four buckets per doubling (the two bits after the
-- leading one), so any 32-bit value falls in one of 124 buckets whatever the
-- unit (cores, MB, millicores). Every task of a bucket below the one that
-- holds `available` fits, so a claim reads each such bucket's best task in
-- one index probe and never enumerates distinct required values. Stored in
-- tasks.bucket (a generated column), so nothing writes it but PostgreSQL.
--
-- Version 2 returns the same values as version 1 (tests/test_fit_buckets.py
-- checks the edges), so no stored bucket changes, for a tenth of the cost of
-- every row written: the bit length comes from width_bucket over the powers
-- of two, not a bit-string conversion, and the function is not STRICT, so
-- PostgreSQL inlines it. Version 1 cost 8 µs a row, more than the rest of an
-- insert.
CREATE OR REPLACE FUNCTION required_bucket(r integer) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN r < 16 THEN r::smallint
            ELSE (4 * (width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) - 1)
                  + ((r >> (width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) - 3)) & 3))::smallint
       END;
