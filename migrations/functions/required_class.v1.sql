-- required_class: the coarsest fit level of a required amount, for
-- ix_tasks_fit_class.
--
-- One class per doubling: 0 holds 0, 1 holds 1, and class c >= 1 holds
-- [2^(c-1), 2^c), so any 32-bit value falls in one of 32 classes. Every
-- class below the one that holds `available` + 1 fits whole, so a claim
-- reads the best task of each in one probe: about 20 probes for an amount
-- near a million (MB, millicores), where the 124 buckets of required_bucket
-- took 75. Each class splits into whole buckets of required_bucket (exact
-- below 16, four per doubling above). An index expression like
-- required_fine: not STRICT, so PostgreSQL inlines it into every row
-- written.
CREATE OR REPLACE FUNCTION required_class(r integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN r < 1 THEN 0 ELSE width_bucket(r, '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[]) END;
