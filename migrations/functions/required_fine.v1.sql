-- required_fine: the fine fit bucket of a required amount, for ix_tasks_fit_fine.
--
-- Exact below 512; above, 256 buckets per doubling (the eight bits after the
-- leading one), monotone in r, at most 6143. A bucket of required_bucket
-- (four per doubling) splits into 64 of these, so a claim that must search
-- the bucket holding `available` reads each whole fine bucket's best task
-- in one probe and walks only the one that holds `available`: 1/256 of a
-- doubling wide. An index expression, not a column, so adding it rewrote no
-- table. It is evaluated for every row written, so it is cheap: width_bucket
-- over the powers of two gives the bit length by binary search, and it is
-- not STRICT, so PostgreSQL inlines it (a strict function whose body is a
-- CASE is called, not inlined: 3 µs a row).
CREATE OR REPLACE FUNCTION required_fine(r integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN r < 512 THEN r
            ELSE 256 * (width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) - 8)
                 + (r >> (width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) - 9)) - 256
       END;
