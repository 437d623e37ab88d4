-- required_mid: the fit level between required_bucket and required_fine, for
-- ix_tasks_fit_mid.
--
-- Exact below 64; above, 32 per doubling (the five bits after the leading
-- one), at most 863. A bucket of required_bucket (four per doubling) splits
-- into 8 of these, and each of these into 8 buckets of required_fine (256
-- per doubling), so the claim reads the boundary bucket's whole part in at
-- most 7 + 7 probes, where 63 fine probes did it before. Inlined like
-- required_fine.
CREATE OR REPLACE FUNCTION required_mid(r integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN r < 64 THEN r
            ELSE 32 * (width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) - 7)
                 + (r >> (width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) - 6)) + 32
       END;
