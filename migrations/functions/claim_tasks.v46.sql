-- claim_tasks: the resource-fit claim, as one PL/pgSQL function.
--
-- Returns up to p_limit tasks: walking the claimable (queued, unparked) tasks
-- in claim order, (priority, id) or (priority descending, id) when
-- p_descending, it takes each one whose required fits in what is left of
-- p_available (NULL: no limit), whose pool has a free slot, and that no
-- concurrent claim has locked. With p_peek it locks and writes nothing and
-- returns what a claim of one task would take now (due scheduled tasks
-- included, which a claim would promote first).
--
-- Cost per task taken is bounded whatever the mix of priorities and sizes:
-- 1. A window: the next rows in claim order (ix_tasks_claim, (queue,
--    priority, id)), read lazily, at most c_scan (one queue) or c_window per
--    queue (several), 64 rows either way (version 6; 256 before, which cost
--    more than it saved once the buckets got cheap). When fitting tasks are
--    dense at the head, as the naive query likes them, the answer is found
--    here just as the naive query finds it.
-- 2. Otherwise fit_candidate: one probe per whole bucket of four nested
--    levels (fit_candidate v3), and a bounded look at the fine bucket that
--    holds what is left + 1. No loop over distinct priorities or required
--    values. When what is left is below 16, the levels are exact and every
--    bucket that fits is whole: at most 11 probes, so such a claim asks the
--    buckets only (version 4).
-- 0. With no available amount (NULL: every task fits), one queue, ascending,
--    the next rows in claim order are locked in one statement (its LIMIT
--    counts only rows it could lock), not taken one take_task at a time;
--    pooled rows still ask their pool for a slot, in claim order (one seen
--    full when read is not asked, version 25). This is the
--    default Worker's claim (version 5). Once a pool turns out full, or the
--    statement runs dry, steps 1 and 2 go on from the last key.
-- H. One task, one queue, ascending (version 7, the common single claim):
--    the first c_head (8) rows in claim order are read once; the first of
--    those that fit, have no pool and come before any fitting pooled row,
--    and that no one has locked, is locked and started in one statement.
--    The general path costs a cursor, a take_task call and a final UPDATE
--    for the same row: on a dense head (one priority, the oldest tasks fit)
--    that was about a third more server time per claim than the naive query
--    (pgbench, 8 clients, claim + done: 1,900 against 3,400 loops/s; 2,200
--    with this step). When none of the 8 fits, the window goes on after
--    them; when a fitting row is pooled or locked, steps 1 and 2 run as
--    before, from the start.
-- Every queue (p_queues NULL), ascending (version 8): steps H, 0 and 1 read
--    claim order over every queue at once (ix_tasks_claim_any, (priority,
--    id)), so their cost does not depend on how many queues there are. Before,
--    each claim first listed every queue with queued work (a loose scan, a
--    probe per queue) and read a 64-row window from each of them: with 10
--    queues a claim on a dense head ran at 0.37x the naive query, with 2,000
--    at 0.01x. The queues are listed only when the buckets are asked (step 2),
--    whose indexes are per queue.
-- W. Every queue, ascending, when the window found nothing (version 9): the
--    buckets' indexes lead with the queue, so asking them costs about 27
--    probes per queue, and with 1,000 queues a claim whose head held nothing
--    that fit ran at 0.07x the naive query (queues_half). First the queues
--    are listed, at most c_list (8) of them (claimable_queues). One queue:
--    the buckets, as before. Several: the window goes on along the claim
--    order over every queue, v_per_queue rows per queue listed since the
--    last task taken; when that is spent and the list is incomplete, four
--    times as many queues are listed and the walk goes on; only when every
--    queue is listed and its share walked are the buckets asked. v_per_queue
--    is 8 rows per class below what is left + 1: measured, one queue's
--    buckets cost about as much as 6 walked rows for 0 left, 65 for 50, 100
--    for 500 and 170 for 500,000, and listing a queue about 10. So the claim
--    costs at most about twice the cheaper of the two, the naive walk or the
--    per-queue search, whatever is left to fit.
-- H runs whatever is available (version 9; before, only from 16 up, where
--    the window runs): with slots (every task needs 1, 4 available) the
--    first row fits, and reading 8 rows costs less than asking the buckets.
-- H became the look (version 10, migration 0013): it reads on until 8 rows
--    fit or its budget (32 rows per class below what is left + 1) is spent,
--    in one plain statement, and a single queue's look runs again from the
--    task the buckets found. Measured on the shape where tasks too big for
--    the claim pile up at the head (one queue, sizes 1..1M, half fit), the
--    naive query walks that pile row by row at a fraction of a microsecond
--    a row, while version 9 paid its 64-row cursor window and the buckets
--    (about 0.8 ms of server time a claim) as soon as the pile was longer
--    than 72 rows; and with 8 consumers all of them were sent by the
--    buckets to the same task, so each claim called take_task 2.5 times.
--    A session remembers a look that ran dry over one queue (a setting,
--    taskqueue.dry_look): the next 15 claims of no larger an amount skip
--    the look and ask the buckets at once, then one looks again. The hint
--    skips a statement, never a row, so it cannot change what is claimed.
-- Version 11 (migration 0014): a look that meets a fitting row in a pool
--    hands the general path the key just before that row, not the key the
--    look started from. Measured where every task has a pool (mb_half with
--    pools), version 10 read the same rows again, up to 608 a claim, where
--    version 9 read 8 again; everything before that row was either too big,
--    or a fit with no pool that no one could take (locked, or taken since).
--    A hint that does not read 'amount:skips:queue' (set by hand, say) is
--    cleared rather than parsed, so it cannot make a claim fail.
--    The look no longer numbers the rows it reads (row_number() cost as much
--    as reading them: over a pile of 1,500 rows, 623 us against 331 us); it
--    numbers only the fits, and when nothing fits the same statement reads
--    the budget's last key (one snapshot, so no row goes unread between the
--    two). Over every queue, a dry look walks on in the same plain statement
--    as step W would (c_walk, 16 rows a queue for each class below what is
--    left + 1; a walk with no cursor reads a row for about half what W's
--    windows paid), listing queues only as the walk outgrows those listed,
--    and keeps their count in the session (taskqueue.queue_count), so the
--    next claim's first look may walk that far before it lists any. Measured
--    over 1,000 queues with a pile at the head (queues_half), server time per
--    claim fell from 1,259 us to 799 us, and claimable_queues from 1.6 calls a
--    claim to none.
--    A list of several queues looks that far along the shared order at once
--    (its first look's budget is c_walk rows a listed queue for each class):
--    over 20 listed queues of 40 (listed_half), 2,148 and 2,273 us a claim
--    against 3,126 and 2,684 for version 10, in alternating runs.
-- Version 12 (migration 0015): the look starts a pooled task itself. It
--    reads, with each fit, whether its pool was full (no lock); the first fit
--    no one has locked among those whose pool was not full, pooled or not, is
--    locked and started with its pool's slot taken, in one statement.
--    Fits in full pools are passed over, their pools known full for the rest
--    of the call and their rows parked. Version 11 sent every pooled fit to
--    the general path (a cursor window, take_task and take_pool_slot, the
--    buckets, park_rows): where every task has a pool and half the pools are
--    full (mb_half with pools), that was 1.6 bucket searches and 1.8 take_task
--    calls a claim. A task the buckets find in a pool goes back to the look,
--    as one with no pool did.
-- Version 13 (migration 0016): the same steps for less server work, counted
--    in instructions under callgrind (python -m bench instructions;
--    deterministic, where timings on this machine move by a fifth between
--    runs): one claim + done on one queue whose tasks all fit (one_size,
--    20,000 tasks), 1,949k instructions with version 12, 1,799k with this
--    one, 1,865k for the naive query. Each step's share below was counted
--    by hand on the same harness (100,000 tasks).
--    - Due scheduled tasks are asked for with a read before the UPDATE that
--      promotes them (58k): an UPDATE that changes nothing still opens the
--      table and all its indexes.
--    - The look's aggregates sort nothing they need not (63k + 28k). Version
--      12 numbered the fits (row_number) and sorted by that number once per
--      aggregate: eight sorts a claim. The candidates are now ordered by
--      their key (priority, id), the last key read is max(ARRAY[priority,
--      id]) and the first pooled candidate's min(...), and the fits in full
--      pools (to be parked) need no order.
--    - The take locks its candidates one at a time in the look's order, and
--      stops at the first it gets (12k): a lateral lookup per candidate under
--      LIMIT 1, where version 12 joined all eight and sorted them before
--      locking the first.
-- Version 14 (migration 0018): a list of several queues learns a dry look
--    too. Over 20 listed queues of 40, the other queues' tasks stay queued
--    at the head of the shared order, one more each claim; once that pile
--    outgrew the look's budget (c_walk rows a listed queue for each class,
--    2,240 rows for 100 left), every claim read the budget twice (the look,
--    then its last key) before each listed queue's own window found the
--    task: 1.27 ms of server time a claim at 1M tasks where the naive query
--    spent less. The session's hint now covers a list as it covers one
--    queue (its key: 'md5:' and the md5 of the list), and a skipped look
--    goes straight to the listed queues' own windows, from the start of the
--    order, as if the look had run dry. Only from 16 left up, where those
--    windows run; below it the levels are exact and the buckets are asked.
--    One task in descending order over one queue (step D) has no look: its
--    first window reads c_scan rows through a cursor, then the buckets. Over
--    a pile of tasks too big at the head (priorities 0..9 descending, sizes
--    1..1M, half fit), every claim paid that window before the buckets, and
--    with 8 consumers it ran at 0.76x the naive query over its own (priority
--    DESC, id) index. A first window that read all c_scan rows and took
--    nothing now sets the same hint (its key: 'desc:' and the queue), and
--    the next 15 claims of no larger an amount ask the buckets first.
-- Version 15 (migration 0019): in descending order, a candidate of the
--    buckets lost to a concurrent claim is followed by the window from that
--    row, whatever is left, not by the buckets again. With 8 consumers over
--    one queue where every task has its own priority (deadlines_max), all of
--    them were sent to the same row and each claim asked the buckets 3.06
--    times (pg_stat_user_functions over 5 s), each time three descents per
--    bucket; the window reads the rows right after the lost one, which in
--    that shape are the next fits.
-- Version 16 (migration 0021): a single claim whose task the buckets found,
--    with no pool, locks and starts it in one statement (the look's way),
--    where take_task locked it and the final UPDATE started it: a call and a
--    statement fewer for each claim that asks the buckets outside the look
--    (descending order, and lists of several queues).
-- Version 17 (migration 0024): a list of several queues whose own windows
--    ran dry says so too. Over 20 listed queues of 40 (listed_half), after a
--    few thousand claims each listed queue's head holds the tasks too big
--    for the claim, so each queue's own 8-row window (one statement, 20
--    queues) found nothing, about 320 us of the claim's 1,845, before
--    fit_candidate searched every listed queue anyway. When those windows
--    read all they may and nothing fit (not even a row locked elsewhere), the
--    hint's key becomes 'own:' and the md5 of the list, and the next 15
--    claims of no larger an amount skip the look and the windows and ask the
--    buckets from the start of the order, which find the same task.
-- Version 18 (migration 0025): a single descending claim over one queue
--    that lost its row to a concurrent claim (the buckets' candidate, or
--    every fit of a window) reads on as the look does: one statement reads
--    the next window into an array, and a second locks and starts the first
--    of its fits, ahead of any pooled fit, that no one has locked. Version 15
--    read that window through a cursor, called take_task for each fit in
--    turn and started the row it got with a last UPDATE. With 8 consumers over one queue, sizes
--    1..1M, priorities 0..9 descending and half of them fitting
--    (mb_half_max), each claim lost a row about as often as it won one:
--    2.42 take_task calls a claim, and the function's own time 3.6 times
--    that of a lone consumer, where fit_candidate's rose 2.2 times. When
--    every fit read is locked, the claim goes on after the window's last row
--    as the cursor would; when a pooled fit was read, the cursor path reads
--    the same window, as before.
-- Version 19 (migration 0026): a row looked up by id is tested with
--    state = 'queued' COLLATE "C" (the same test: equality of text does not
--    depend on a deterministic collation). The claim indexes' predicate says
--    state = 'queued' under the default collation, so the planner can no
--    longer prove it from that test and use one of those indexes for the
--    lookup. It did whenever their statistics were taken while the queue
--    was nearly empty (a quiet moment, a new queue, before a burst): such an
--    index looks empty, so a walk of all of it with a filter on id seemed
--    cheaper than the primary key. 200,000 tasks enqueued after an ANALYZE
--    of an empty queue: each take read all of ix_tasks_fit_mid, 1,336
--    buffers, and a claim of 100 read 140,714 (455 ms) against 7,810 once
--    analyzed again. take_task (version 2) and park_rows (version 2) test
--    their rows the same way.
-- Version 20 (migration 0028): a claim over every queue with less than 16
--    left asks fit_candidate for every queue at once (p_queues NULL), which
--    probes ix_tasks_fit_small_any (bucket, priority, id), one probe per
--    amount, whatever the number of queues. Before, such a claim whose head
--    held nothing that fit listed every queue with claimable tasks, walked
--    the shared order 16 rows a queue and class, and asked each queue's
--    buckets: over 1,000 queues whose tasks each had their own priority and
--    the 1% that fit the worst ones (queues_deadlines), 33 ms a claim, about
--    10 us a queue for each of the three, and 1.17x the naive query with 8
--    consumers at 1M tasks. Its look no longer walks as far as the queues'
--    buckets would be worth either: the buckets of every queue cost one
--    queue's. In descending order such a claim listed every queue before
--    anything else, and a row lost to a concurrent claim sent it to a
--    window of every queue; now it lists none, and after a lost row asks
--    whether one queue or several have claimable tasks (two probes): one
--    goes on as that queue's claim, with its window; several ask the buckets
--    of every queue again from that row.
-- Version 21 (migration 0029): a claim over every queue in descending order
--    with 16 or more left (or no amount) no longer lists every queue first
--    and reads a window of each. It asks whether one queue or several have
--    claimable tasks (two probes); one goes on as that queue's claim, as
--    before. Over several, its windows read the order over every
--    queue (ix_tasks_claim_any, (priority, id)): the distinct priorities are
--    found from the best down, one descent each (a recursive statement,
--    read only as far as the window needs), and each one's rows in id order,
--    so a window spans as many priorities as its rows fill. When windows
--    find nothing, step W lists the queues a few at a time as the walk
--    outgrows them, as in ascending order, and only then asks the buckets of
--    the listed queues. The session keeps how many queues that walk listed
--    (taskqueue.queue_count, as the ascending look does), and its next
--    claim's first window may walk as far before it lists any: over a pile
--    of tasks too big at the head, 1.68 ms a claim + done against 2.43 with
--    a listing each claim (queues_half_max, 200,000 tasks, a pile of about
--    1,000). A single such claim looks as an ascending one does (step H):
--    one plain statement reads that order up to its budget and stops at 8
--    fits, and a second starts the first of them that no one has locked;
--    the windows' cursor, take_task and the last UPDATE cost about a fifth
--    more server time a claim there. Before, over 1,000 queues with half the tasks
--    fitting (priorities 0..9), every claim listed the 1,000 queues and
--    merged their windows, which end at the shortest queue's last key:
--    0.01x the naive query over its (priority DESC, id) index at 200,000
--    tasks, 127 ms a claim.
-- Version 22 (migration 0030): a claim over every queue in descending order
--    reads the priorities below the current one from a new index,
--    ix_tasks_claim_desc (priority DESC, id) over every queue's claimable
--    tasks: one plain walk in claim order, as the ascending claim reads
--    ix_tasks_claim_any, with no descent per priority and no cap on the
--    priorities a walk spans (version 21's budget / 64). Where every task
--    has its own priority, version 21 paid two descents for every row:
--    over 1,000 queues with sizes in MB and 2% fitting
--    (queues_deadlines_mb_max), 0.10x the naive query at 200,000 tasks.
--    Reading (priority DESC, id DESC) a chunk at a time from
--    ix_tasks_claim_any and each chunk's whole priorities again in id order
--    (no new index) reached 0.51x at 1,000,000, and a row's read cost about
--    twice the naive query's. The rest of the current priority is still
--    read from ix_tasks_claim_any, (priority, id) > the last key, so a
--    window that resumes inside a priority of 100,000 tasks does not read
--    that priority's rows again. And a claim of one task over a list of
--    several queues in descending order looks first, as an ascending
--    list's does: one statement reads that order over every queue and
--    keeps the listed queues' rows. A dry look goes to the list's buckets
--    and looks again from what they found, as one queue's does, and the
--    session's next claims over that list and no larger an amount ask the
--    buckets at once (hint 'dmd5:'). Before, every such claim merged a
--    window of each listed queue: over 20 of 40 queues with half the tasks
--    fitting (listed_half_max), 0.33x the naive query.
-- Version 23 (migration 0032): due scheduled tasks are promoted in one
--    statement. Version 13's loop promoted them 1,000 at a time, each batch
--    from the start of ix_tasks_scheduled (run_at), where the rows promoted
--    by the earlier batches of the same call still have their entries (the
--    old versions, deleted by this transaction): batch k stepped over
--    1,000 * (k - 1) of them first, so a burst cost quadratic time. The
--    first claim after 1,000,000 tasks fell due at once took 154 s, 57 s in
--    one pass; after 200,000, 14.8 s and 10.3 s. What is left is the
--    promotion itself, a row update and its claim index entries, about
--    50 us a task: a burst of due tasks still costs the first claims that
--    long, shared among the claims that run meanwhile (each skips the rows
--    another holds). Spread run_at (jitter) to spread that cost.
-- Version 24 (migration 0033): the rows a claim parks are parked after the
--    tasks it takes are started, as every other path already did. The end
--    of the fit path parked first: park_rows (version 3) also parks the
--    claimable rows right after those walked past, and a task this call
--    had taken (locked and its slot held, still queued) could be one of
--    them when taking it filled its pool. It was then started parked, and
--    went back to the queue parked when its lease expired or it was
--    retried, out of the claim index while its pool had room. Started
--    first, it is running and park_rows passes it by.
-- Version 25 (migration 0035): step 0 reads each row's pool with it, as the
--    look and the windows do, so a pool already full is known without a
--    lock. Before, each claim's first pooled row asked take_pool_slot, whose
--    first pool row may be waited for: with one pool of limit 2 holding
--    every other task, all 8 consumers queued on that pool's row before
--    each of their claims, full or not, where the naive query reads the
--    pool and passes by. A pool with room is asked for a slot as before.
-- Version 26 (migration 0036): step S. A claim of one task with less than
--    16 available (c_exact: every bucket below it holds one size, so each
--    fits whole) reads the first c_head rows of each bucket that fits, in
--    claim order, merges them and takes the first no one has locked: one
--    statement to read, one to lock and start, where version 25 parsed the
--    session's hint, looked along the claim order, asked fit_candidate,
--    looked again from its answer, then took (five statements and the
--    calls around them). Ascending only: descending, a bucket's first rows
--    in claim order are not its first in the index, and a claim goes the
--    general way as before. Taken only while no candidate ahead is pooled:
--    a pooled one goes the general way (the look takes its slot with it),
--    and the session skips step S for the next c_dry_skips such claims
--    (taskqueue.small_skip; the hint skips a statement, never a row). Every
--    candidate locked elsewhere: the general way too.
-- Version 27 (migration 0037): step S descending, and with pools. Read
--    backward, a bucket's last c_head rows come in (priority DESC, id DESC),
--    so the rows of its lowest priority read may be cut short, and a
--    priority's rows come newest first. Every row of a priority above the
--    highest such cut, over all the buckets read, was read, so those rows,
--    merged in claim order (priority DESC, id), are the first fits in claim
--    order. None above it (the best priority fills a bucket): the general
--    way, and the session skips step S for its next c_dry_skips small
--    claims. Pooled candidates are taken by step S too (version 26 sent a
--    pooled one first the general way): the take asks the first lockable
--    candidate's pool for a slot under its lock, as the look's take does.
--    A full pool there starts nothing, and the claim goes the general way
--    (which parks that task), the session skipping step S as before.
-- Version 28 (migration 0038): when the best priority fills a bucket, step
--    S reads that priority forward. Nothing above the cut means every row
--    read is at or below the highest cut, and the bucket that set it read
--    c_head rows of that one priority: it is the best priority that fits
--    (v_top). Each bucket's first c_head rows of it are read forward from
--    (bucket, v_top, 0), and merged by id their first c_head are the first
--    in claim order (a bucket that gave c_head holds that many ids below
--    any it did not give). Version 27 sent such a
--    claim the general way and skipped step S for the next 15 small claims:
--    with few priorities and every task of one size, descending (one_size_
--    max), 15 of every 16 claims went the general way, 0.64x the naive query
--    with 8 consumers.
-- Version 29 (migration 0039): a list's rows are kept from the walk over
--    every queue by a hashed lookup of the list, "queue IN (SELECT ... FROM
--    unnest(v_queues))", not "queue = ANY (v_queues)". Under a generic plan
--    the list is a parameter, and PostgreSQL 15 hashes "= ANY" only for a
--    constant array, so each row read was compared with every queue listed:
--    with a list of 200 queues of 1,000 (listed_long) the filter cost five
--    times the walk it filtered, and a claim 0.48x the naive query. The
--    IN sits inside an OR, so it stays a subplan, which PostgreSQL hashes
--    once per statement, and the walk's order is untouched.
-- Version 30 (migration 0040): a list of several queues, ascending, below
--    c_exact. Its session now keeps the dry-look hint as it does from
--    c_exact up: over 20 listed queues of 40, every task its own priority
--    and the fits at the worst ones (listed_deadlines), each claim read the
--    look's whole budget in vain (960 rows, about half its server time)
--    before the buckets. And a row the buckets found that a concurrent
--    claim took sends the claim to the shared window on from that row,
--    whatever is left, as in descending order since version 15; it asked
--    the buckets again from that row, and with 8 consumers sent to the same
--    row each claim asked them 3.3 times.
-- Version 32 (migration 0046): a claim that took nothing after passing fits
--    in full pools asks park_rows (version 6) to park those pools' fitting
--    rows in bulk (p_empty). Every candidate fit_candidate returns lies
--    outside the pools already found full, so such a claim met each pool
--    holding a fit; with every task its own priority, version 31's claim
--    parked about 21 rows and the next one met the same fits again.
-- Version 33 (migration 0047): step K, a walk that skips locked fits.
--    After c_lost (8) fits lost to other transactions' row locks, in
--    either order and over any queues, the claim walks the claim order on
--    from the last key settled and locks the first fit in it that no one
--    holds (FOR UPDATE SKIP LOCKED, pools already found full passed over),
--    in one statement, as the naive query does, over at most v_kbudget
--    rows: 64, doubling to 8,192 while walks find nothing, 64 again after
--    a task taken. Before, each locked fit cost a probe of the buckets
--    (fit_candidate), a take_task call or a window statement: where
--    another transaction held 20,000 fits FOR UPDATE, an empty claim took
--    1.5-3.4 s against the naive query's 30-55 ms (bench locked_fits).
--    Walks go on while the rows they may have read stay below c_kprobe
--    (256) per fit lost; past that the buckets, which jump over tasks too
--    big, go on alone until more fits are lost. So where held fits are
--    dense a claim walks them at about the naive query's pace, and where
--    they are spread among piles of tasks too big (200 held, 2,000 rows
--    apart) the walks cost about what the probes do: 35 ms there, against
--    17 before and the naive query's 52. A row the walk locked is then
--    taken as a candidate of the buckets would be: take_task finds it
--    already held by this transaction. A list of several queues walks the
--    order over every queue and keeps its own rows by a hash of the list,
--    the budget counted over every queue's rows. Descending, no index has
--    the claim order of one queue (priority DESC, id), so a walk reads the
--    rest of one priority in id order, or the whole priorities below the
--    key that hold fewer rows than the budget (their lowest found by
--    reading the index backwards), sorted: at most the budget's rows
--    either way.
-- Version 34 (migration 0048): one task in descending order over one
--    queue looks as an ascending claim does (step H), where step D read a
--    window that spans two priorities at most (the rest of the current one
--    and the next) and then asked the buckets. Where each priority holds a
--    few tasks (priorities that are epoch seconds, 2-3 tasks each, sizes
--    rising with id and 90% fitting: the tasks too big pile up at the head,
--    spread over many priorities), every claim fell to fit_candidate, about
--    3 ms and 396 buffers of a 4.1 ms claim: 0.56x the naive query over its
--    (priority DESC, id) index. ix_tasks_claim (queue, priority, id) has no
--    such order, so the look reads it in parts, each only when the ones
--    before it hold fewer than c_head fits: the rest of the current
--    priority in id order; the next priority below it in id order; then
--    chunks read backwards, 8 rows, then 16 from the lowest priority the
--    last one read, doubling up to 512. Read backwards, a priority's rows
--    come newest first, so only the priorities above the lowest one a
--    chunk read hold every row they have: those are sorted into claim
--    order. Doubling keeps what a look reads within about twice what it
--    needs: a first cut with a chunk of 32 and then one of the whole budget
--    read 640 rows to pass a pile of 180 (675 buffers, about 2.2 ms of
--    server time a claim against 1.8 for version 33's buckets). All of it
--    capped at v_look rows in claim order (the budget, 32 rows a
--    class, as ascending). The first two parts are a statement of their
--    own (at most c_scan rows), where dense heads stop, as step D's window
--    did: the executor starts every index scan of a plan on each call, and
--    the whole look has about twenty (every task its own priority, all
--    fitting: 0.88 ms of server time a claim as one statement, 0.52 so,
--    0.61 for version 33). Past a dry look (or under its hint) the general
--    path asks the buckets and takes their task in one statement, as
--    step D did. A dry look sets the hint 'desc:' and the queue,
--    as step D's first window did, and the buckets start inside the best
--    priority (one descent) while it holds.
-- Version 31 (migration 0041): step L, a list of several queues, ascending,
--    below c_exact, while the session's hint says the look along the shared
--    order ran dry for this list. Version 30 asked fit_candidate, a probe
--    per listed queue and bucket (100 for 20 queues and 4 available) for
--    the one first fit, so 8 consumers were sent to the same row. Step L
--    reads each fitting bucket's first c_lwalk rows over every queue
--    (ix_tasks_fit_small_any, one descent a bucket) and keeps the listed
--    queues' rows (a hashed lookup of the list) up to the cut, the smallest
--    last key of a bucket read to its budget: every listed fit before the
--    cut was read, so those rows are the first fits in claim order, and the
--    first c_head of them are taken as step S takes its candidates. When
--    none is before the cut (other queues' small tasks come first), the
--    claim goes the general way and the session skips step L for its next
--    c_lskips (99) small claims: such a read costs about 1.5 dry looks
--    (206 rows fetched against 142 where another queue's 1,000 small tasks
--    lead the shared order), once in 100 claims.
-- Version 35 (migration 0049): the descending look over one queue walks
--    ix_tasks_claim backwards, which is claim order but for ids within a
--    priority, and stops at its c_head-th fit as the naive query stops at
--    its first: every fit of the priorities above the lowest one it kept is
--    among them, and that priority's own fits are read forward, in id
--    order. Version 34 read chunks backwards, 8 rows doubling to 512, and
--    sorted their whole priorities: up to twice a pile read and all of it
--    sorted, so where every task has its own priority, shuffled, and half
--    fit (the pile grows by one task a claim), 0.68x the naive query.
-- Version 36 (migration 0050): a claim of one task over a list of several
--    queues in descending order looks along the order over every queue
--    below c_exact too (version 22 did so from c_exact up). Step S serves
--    small claims over every queue or one queue, and an ascending list's,
--    but not a descending list's, so each of those asked fit_candidate.
-- ix_tasks_claim_any has the predicate "... AND id > 0" (version 9,
--    migration 0012), and only the statements over every queue state it, so
--    no other statement can use that index. Every id is positive (a CHECK
--    says so), so it holds every claimable task. Without it, a bucket probe
--    of fit_candidate over a table whose tasks all had one size (every task
--    needs 1, available 10: statistics say any bucket matches every row)
--    was planned as a walk of (priority, id) with a filter: 1,774 buffers
--    and 18 ms per claim at 30,000 tasks, growing with the backlog.
-- Both only ever move forward from the last key settled (taken, too big,
-- locked elsewhere or in a full pool), so a batch never looks at a row twice.
--
-- enable_seqscan is off for the call (version 5): every statement here is an
-- index walk or a lookup by id, and the generic plans are made once per
-- session. A worker that started on an empty table kept a plan that
-- seq-scanned the whole table to start each claimed batch (id = ANY (...)),
-- until autovacuum's ANALYZE happened to invalidate it.
--
-- JIT is off for the call (version 6), and so for fit_candidate under it:
-- these statements run in well under a millisecond, and their estimates
-- (generate_series counted at 1,000 rows) could cross jit_above_cost, which
-- compiles the statement again on every call (40 ms).
--
-- Candidates are found without locks and then taken one at a time by
-- take_task (FOR UPDATE SKIP LOCKED, then the pool slot), so a claim holds
-- locks only on what it takes.
--
-- Full pools: the window reads each row's pool with it, so a pool already
-- full costs no lock to find out (version 5; before, take_task locked the row
-- and tried the pool's slot). Rows passed over because their pool is full are
-- parked at the end (park_rows), out of the claim indexes until their pool has room, so
-- each is walked past once per time its pool fills, not once per claim.
--
-- Pool locks: the first pool row this transaction locks may be waited for;
-- every later one is taken with SKIP LOCKED (busy counts as full for this
-- call). A claim therefore never waits while holding a pool lock, so claims
-- cannot deadlock with each other or with releases, which lock in name order.
-- Version 37 (migration 0052): step F, a claim of one task over 4 to 128
--    queues (every queue, or a list) with c_exact or more available, asks
--    few_fits first while the session's hint says the fits for at least this
--    amount were few (few_fits reads every fit, index only, within a budget
--    of 128 rows a queue). The hint is set by fit_candidate's own read of the
--    fits (version 13), which only a claim whose look and walks found no fit
--    reaches: a claim whose look finds dense fits never pays for step F.
--    Read whole, the fits' first c_head in claim order are taken as step S
--    takes its candidates; past the budget, or when no candidate could be
--    started, the claim goes the general way. On the sixth random draw's r14
--    (100 queues, order="max", every task its own priority, sizes in bytes,
--    0.05% fitting, 200,000 tasks), version 36 walked the shared order and
--    then asked every queue's levels: 65 ms a claim at the median, 4.1 ms
--    now (8.51x the naive query, from 1.09x).
-- Version 38 (migration 0053): the small steps over every queue (S below
--    c_exact, and step L) read ix_tasks_fit_any_exact (required, priority,
--    id), every queue's claimable tasks by size, in place of
--    ix_tasks_fit_small_any (bucket, priority, id) over those needing less
--    than 16, which the migration drops: the bucket of an amount below 16 is
--    the amount, so the rows and their order are the same, and a task needing
--    little pays one index entry where it paid two.
-- Version 39 (migration 0054): a claim of one task over every queue asks
--    count_few_fits whether every queue's fits are few (one range of
--    ix_tasks_fit_any_exact, within a small budget that grows while the
--    count runs past it), for step F's hint and for itself: at its first dry look,
--    and before a look whose budget the session's count of queues set
--    (which may walk that far). Over 1,000 queues with 0.05% of the tasks
--    fitting at the far end of the order (the wide draw's w16), the walk
--    along the shared order reached each fit before any claim asked
--    fit_candidate, so no read ever said the fits were few and every claim
--    walked (60 ms at 200,000 tasks). Found few, the look goes on from the
--    first of them (few_fits, one range again), and the session's next
--    claims take step F.
-- M. Several tasks (version 40, migration 0055): a claim of more than one
--    task over every queue or a list of 4 to 128, with c_exact or more
--    available and below 2^31, asks the same: the session's 'few' hint, or
--    else count_few_fits. Found few, few_fits reads every fit after the key
--    in claim order, and they are taken in that order, each one that still
--    fits what is left (take_task: its lock, then its pool's slot), as the
--    walk would take them; with every fit read, nothing past the last one
--    fits, so the claim ends there. Over 1,000 queues with 0.05% of the
--    tasks fitting (queues_epoch_falling_rare), claim_many(limit=100) walked
--    the shared order between its fits: 15,053 buffers at 200,000 tasks,
--    and its time per task grew 6.8x from 10,000 tasks to 1,000,000 (16.9x
--    on queues_mb_rare_max). A read past its budget (few_fits' NULL) sends
--    the claim the general way from the last key it settled.
-- Version 41 (migration 0056): step F takes the first of 32 fits no one
--    holds, where it took the first of 8. With 8 consumers on the same few
--    fits, a claim whose 8 candidates were all held or taken since its read
--    cleared the session's hint and walked the shared order as the naive
--    query walks it, until a count found the fits few again: over 1,000
--    queues with 0.05% fitting at 1,000,000 tasks, 8 consumers ran at
--    0.25-0.39 of the by-id ceiling where one ran at 0.73-0.86 of it.
--    When every candidate is lost even so, the claim over every queue
--    counts the fits at its first dry look, as one with no hint does.
--    count_few_fits v2 no longer skips calls below its largest budget
--    (1,024 rows): each of those sessions walked its first 3 claims to the
--    far end before a count found the 500 fits few, and now walks its
--    first. (A draft that counted on at once at the same dry look, 128,
--    512 and 1,024 rows in one claim, walked none, but its first claim
--    read about a heap page a row counted where the visibility map is
--    unset: 1,683 buffers more behind 10,000 fits, on the embedded server
--    the tests run on.)
-- Version 42 (migration 0057): the claim tells park_rows (version 7) its
--    amount and direction, so that where every task has its own priority
--    the rows parked after a claim that took a task include the fits ahead
--    in claim order across priorities whose pool is full, not only those in
--    the passed rows' own priorities (none there).
-- Version 43 (migration 0058): step S serves one task over every queue with
--    c_exact to c_sany - 1 (16..63) available, not only below c_exact, while
--    the session's hint taskqueue.any_size says such a claim's look ran dry.
--    Over every queue step S reads ix_tasks_fit_any_exact (required,
--    priority, id), whose sizes are exact whatever the amount, so each
--    amount 0..p_available is one read of its first (or last) c_head rows,
--    all of which fit, however long the pile of tasks too big at the head.
--    A list or one queue still goes the general way: above c_exact their
--    buckets are not exact. On the tenth random draw's r23 (100 queues,
--    order="max", 300 priorities, a third of the tasks needing 0 and the
--    rest 1..100, 25 available), the pile outgrew the look over every queue
--    and fit_candidate asked each queue's levels in turn: about 4,000
--    probes, 5.9 ms a call, 0.60x / 0.40x of the naive query.
--    Why a hint: a draft that took step S on every such claim read 51
--    amounts where the look reads a few rows, and ran 0.71x of version 42's
--    claims a second on queues_half_max (1,000 queues, order="max", fits
--    dense at the head). A claim that asks fit_candidate sets it to
--    'amount:0'; the next c_sany_skips (255) claims of no larger an amount
--    take step S and count it up; then the look runs once more, and only a
--    dry one arms it again. With 63, the claims that looked again (a dry
--    look, then each queue's levels: 23 ms at 1,000,000 tasks) were 1.6% of
--    the claims on that shape, so its p99 grew 5.4x from 10,000 tasks. Step S first reads the head of the order over
--    every queue (c_shead, 32 rows at most, stopping at c_head fits): fits
--    there are the first in claim order, taken as the look would take them.
-- Version 44 (migration 0059): park_rows is told whether the claim takes
--    one task (p_limit = 1), and parks in bulk after 8 fits passed in full
--    pools only then (park_rows v8). A claim of one task that passed 8 met
--    the full pools one at a time, a call of fit_candidate each; a claim of
--    many passes fits in full pools as it takes the others, and parking
--    8,192 rows ahead on its behalf put a claim_many(100) at 70,000-82,000
--    buffers (mb_half_pools), over its budget of 10,000.
-- Version 45 (migration 0060): a descending look over a list walks c_dwalk
--    (64) rows a listed queue for each class before the buckets, where
--    c_walk (16) was sized for ascending buckets. Descending, the buckets
--    ask two probes a level, and measured on the eleventh random draw's r20
--    (20 of 40 queues listed, one priority, 146 available, 30% fit) each
--    claim that went to them cost about 4 ms, some 20,000 rows of the look.
--    Each claim takes the first fit, so the tasks that do not fit pile up at
--    the head, one more every few claims: with 16, the look ran dry at a
--    pile of 2,560 rows (claim 455 of a session) and every claim after it
--    asked the buckets. With 64 it reads up to 10,240 rows there, about
--    half the buckets' cost. Where the listed queues' fits are sparse (3 of
--    1,000 queues listed, rows scattered over the heap: the twelfth wide
--    draw's w8) a look reads on to its c_head fits, past where 16 stopped,
--    and runs at 0.85x / 0.87x of version 44 with 1 / 8 consumers (still
--    about 5x the naive query).
--    A draft that read 16 and then, when dry, 48 more from its last key
--    lost as much there and gained less on the lists with a pile (a second
--    start of the look's statement): listed_half_max 1.15x / 1.10x against
--    1.29x / 1.19x, listed_mb_half_max 0.94x / 1.09x against 1.02x /
--    1.34x (one consumer / 8, at 1,000,000 tasks).
-- Version 46 (migration 0062): the head take. A claim of one task over
--    every queue, or over one queue ascending, first runs one statement of
--    the naive query's shape: the next c_htake (32) rows of the claim
--    order, read lazily from the order's own index, the first that fits,
--    is not in a pool known full and could be locked (SKIP LOCKED), started
--    in the same statement. That row is exactly the claim's answer: every
--    row before it in claim order was too big, locked elsewhere or in a
--    full pool. Where fits are dense at the head the claim ends there, in
--    one statement of a small plan, where the look and the take were two
--    (three over every queue descending, which listed the queues first),
--    each starting a plan of many nodes. Counted under callgrind at 20,000
--    tasks, one_size's claim + done fell from 1,560k to 1,325k
--    instructions. A first fit with a pool takes its slot in a second
--    statement (the first, without the pools CTE, is cheaper when no pool
--    is involved). When nothing fits in those rows (a pile of tasks too big
--    at the head, a hard shape), the claim goes on as version 45 did and
--    the session skips the head take for its next 15 claims, 31 after the
--    next miss, and so on up to 255 (the setting taskqueue.head_take;
--    'off' turns the head take off for the session).
CREATE OR REPLACE FUNCTION claim_tasks(
    p_available bigint,
    p_limit integer,
    p_queues text[],
    p_worker text,
    p_lease double precision,
    p_descending boolean,
    p_peek boolean DEFAULT false
) RETURNS SETOF tasks
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    c_window CONSTANT integer := 64;
    c_scan CONSTANT integer := 64;
    c_head CONSTANT integer := 8;
    c_htake CONSTANT integer := 32;   -- rows the head take may read (version 46)
    c_hskips CONSTANT integer := 15;  -- claims that skip the head take after it missed
    c_hmax CONSTANT integer := 255;   -- and at most, after misses in a row
    v_htake text;                     -- the session's setting taskqueue.head_take
    v_hskip integer;                  -- its claims left to skip
    v_hlast integer;                  -- its last skip
    -- Step F's candidates (version 41; c_head before): the take locks the
    -- first one no one holds, so a longer list costs only rows passed over.
    c_fhead CONSTANT integer := 32;
    c_own CONSTANT integer := 8;  -- rows per listed queue in a merged window, ascending (version 9)
    c_look CONSTANT integer := 32;  -- rows a look may read per class below what is left + 1 (version 10)
    v_look integer;
    v_round integer;
    v_hit boolean;     -- the look read all its budget and nothing fit
    v_end_key bigint[];  -- then, the key of the budget's last row
    c_dry_skips CONSTANT integer := 15;  -- claims that skip the look after one ran dry
    v_hint text;
    v_hint_n integer;
    v_hint_amount bigint;
    v_hint_key text;
    v_skip boolean := false;
    v_key text;
    v_okey text;               -- a list's key when its own windows ran dry too (version 17)
    v_owatch boolean := false; -- this claim reads the list's own windows after a dry look
    v_pooled boolean;  -- the look met a fitting row in a pool
    v_ask boolean := false;  -- the look's statement may hold a pool row it did not record: step 0 asks it (version 25)
    v_walk boolean := false;  -- the next look walks on over every queue (version 11)
    v_qhint text;
    v_qcount integer := 0;    -- queues with claimable tasks at the session's last listing
    v_odesc boolean := false;  -- one task, descending, one queue: the look (version 34, walked backwards since 35; step D before)
    v_dfit boolean := false;   -- a window read a row that fits (locked or not)
    v_lost boolean;            -- a window lost a fit to a concurrent claim (version 15)
    c_lost CONSTANT integer := 8;       -- fits lost to row locks before step K walks (version 33)
    c_kmax CONSTANT integer := 8192;    -- the most rows one walk of step K reads
    v_losses integer := 0;     -- fits this claim lost to other transactions' row locks
    c_kfirst CONSTANT integer := 64;  -- step K's first walk, and the next one after a task taken
    v_kbudget integer := c_kfirst;  -- rows the next walk of step K may read
    -- Rows of walk worth one lost fit (version 33): a bucket probe costs about
    -- 160 us, a walked row 0.5-1 us. Step K walks while the rows its walks
    -- may have read stay below c_kprobe per fit lost; then the buckets go on
    -- alone until more are lost, so walks and probes cost about the same and
    -- the claim about twice the cheaper of the two.
    c_kprobe CONSTANT integer := 256;
    v_kread bigint := 0;       -- rows step K's walks may have read (their budgets)
    v_kp integer;              -- descending: the priority step K reads in id order
    v_kpl integer;             -- and the priority of the budget's last row below it
    v_kb bigint;               -- the id of the budget's last row in that priority
    v_kina boolean;            -- descending: this walk reads within one priority
    v_kfrom bigint;            -- from after this id
    v_kmore boolean;           -- that walk read all it may: more rows may follow
    v_klk bigint;              -- the key the walk settled up to
    v_klid bigint;
    v_kid bigint;              -- the fit it locked, if any
    v_again boolean := false;  -- the next window follows a lost row: one statement first (version 18)
    v_wcands bigint[];         -- that window's fits ahead of any pooled fit, in claim order
    v_wpooled boolean;         -- it read a pooled fit
    v_wfit boolean;            -- it read a fit
    v_wlast bigint[];          -- the key of the last row it read
    v_class integer;          -- required_class of what is left + 1
    -- Rows a plain walk over several queues reads per queue and class before
    -- the buckets (version 11). A queue's buckets cost about 64 us at 1M
    -- tasks (50 left: 6 classes), some 250 rows of a plain walk; a walk that
    -- finds nothing is read twice (its last key), so 16 keeps a dry walk and
    -- the buckets within about twice the buckets alone.
    c_walk CONSTANT integer := 16;
    c_dwalk CONSTANT integer := 64;  -- the same for a descending look over a list (version 45)
    v_cands bigint[];
    v_nfit integer;
    v_hk bigint;
    v_hid bigint;
    v_pk bigint;       -- the first fit in a pool that was not full: its key
    v_pid bigint;
    v_fulls bigint[];  -- fits the look read whose pool was full, unlocked (version 12)
    v_fpools text[];   -- and their pools
    v_cap integer;
    v_end boolean;
    v_cur refcursor;
    c_park CONSTANT integer := 500;
    v_parking boolean;
    v_remaining bigint := COALESCE(p_available, 9223372036854775807);
    v_queues text[];
    v_global boolean := p_queues IS NULL AND NOT p_descending;
    -- A list of several queues, ascending: the head is read from the order
    -- over every queue, keeping the listed queues' rows (version 9).
    v_several boolean := p_queues IS NOT NULL AND cardinality(p_queues) > 1 AND NOT p_descending;
    v_lwalk boolean := v_several;  -- the next window is the shared one
    v_own boolean := false;        -- each listed queue's own window was read
    v_listed boolean := p_queues IS NOT NULL;
    v_stop boolean := false;
    c_list CONSTANT integer := 8;
    v_per_queue integer;      -- rows of walk worth one queue's buckets (step W)
    v_want integer;
    v_more boolean := false;  -- the queue list is incomplete
    v_gcap integer := 64;     -- rows the next window over every queue may read
    v_walked integer := 0;    -- rows read by windows since the last task taken
    v_lk bigint := CASE WHEN p_descending THEN -2147483647 ELSE -2147483648 END;
    v_lid bigint := 0;
    c_exact CONSTANT integer := 16;  -- required_bucket is exact below this
    -- Step S over every queue reads exact sizes, so it serves amounts up to
    -- this (version 43): one read per amount, bounded by a constant.
    c_sany CONSTANT integer := 64;
    c_shead CONSTANT integer := 32;  -- rows of the head step S reads first from c_exact up
    c_sany_skips CONSTANT integer := 255;  -- claims step S serves from c_exact up after a dry look
    v_shint text;
    v_sany boolean := false;  -- step S serves this claim from c_exact up (the session's hint)
    -- A claim that could be step S's from c_exact up arms the hint when it
    -- asks fit_candidate (its look ran dry).
    v_sarm boolean := p_limit = 1 AND NOT p_peek AND p_queues IS NULL AND p_available >= c_exact
                      AND p_available < c_sany;
    -- Every queue, descending, below c_exact (version 20): no queue list,
    -- the buckets of every queue at once (what is left only shrinks).
    v_dany boolean := p_queues IS NULL AND p_descending AND p_available IS NOT NULL AND p_available < c_exact;
    -- Every queue, descending, from c_exact up (version 21): windows over
    -- every queue, queues listed only for the buckets.
    v_gdesc boolean := p_queues IS NULL AND p_descending AND (p_available IS NULL OR p_available >= c_exact);
    -- A list of several queues, descending (version 22; below c_exact too
    -- since version 36): one task is looked for along the order over every
    -- queue first, keeping the listed queues' rows, as an ascending list's
    -- look does. Below c_exact no other step served it: every such claim
    -- asked fit_candidate, a probe per listed queue and level (20 queues,
    -- 9 available: about 3 ms a claim, 0.59x the naive query where 90% of
    -- the tasks fit, the third random draw's r13).
    v_ldesc boolean := p_queues IS NOT NULL AND cardinality(p_queues) > 1 AND p_descending;
    -- The look over every queue in descending order reads at most its budget
    -- / c_span rows (version 22), and counts as its budget towards step W:
    -- the hard shapes, whose fits no walk reaches, pay for every row walked
    -- before the buckets (a look of the whole budget: 0.68x of version 21's
    -- claims/s on queues_bytes_max), and version 21 walked budget / 64
    -- priorities. Its windows are not capped: a claim of 100 over 100 queues
    -- with capped windows read 62,097 buffers, 38,428 without
    -- (queues_mb_half_max), as it asked step W more often.
    c_span CONSTANT integer := 4;
    v_dlook integer;
    v_window boolean := p_available IS NULL OR p_available >= c_exact;
    v_w record;
    v_took boolean;
    v_c record;
    v_got boolean;
    v_first_k bigint;
    v_taken integer := 0;
    v_bulk bigint[] := '{}';
    v_park bigint[] := '{}';
    v_full text[] := '{}';
    v_locked text[] := '{}';
    v_asked integer;
    v_seen integer;
    v_small text;              -- step S's hint: claims left that skip it (version 26)
    v_top integer;             -- step S descending: the highest priority a full bucket read may have cut (version 28)
    c_lwalk CONSTANT integer := 16;  -- rows step L reads per bucket over every queue (version 31)
    c_lskips CONSTANT integer := 99;  -- small claims that skip step L after its fits lay past the cut
    v_lcut boolean;                  -- step L: some bucket was read to its budget
    v_lsmall boolean := false;      -- step L: a small listed claim whose look ran dry
    v_fhint text := current_setting('taskqueue.fit_scan', true);
    -- Ask count_few_fits (version 39): one task over every queue, an amount
    -- step F serves, and no 'few' hint for it (or step F would have run).
    v_probe boolean := p_limit = 1 AND NOT p_peek AND p_queues IS NULL AND p_available >= c_exact
                       AND p_available < 2147483647 AND NOT COALESCE(v_fhint ~ '^few:[0-9]{1,19}$'
                       AND p_available <= split_part(v_fhint, ':', 2)::numeric, false);
    -- Step F (version 37): several queues, c_exact or more available, and
    -- the session's last read of every fit for at least this amount found them few.
    v_ffew boolean := p_limit = 1 AND NOT p_peek AND p_available >= c_exact AND p_available < 2147483647
                      AND (p_queues IS NULL OR cardinality(p_queues) BETWEEN 4 AND 128)
                      AND COALESCE(v_fhint ~ '^few:[0-9]{1,19}$' AND p_available <= split_part(v_fhint, ':', 2)::numeric,
                                   false);
    -- Step M (version 40): several tasks, where step F would serve one.
    v_many boolean := p_limit > 1 AND NOT p_peek AND p_available >= c_exact AND p_available < 2147483647
                      AND (p_queues IS NULL OR cardinality(p_queues) BETWEEN 4 AND 128);
    v_mfew boolean;      -- the fits are few (the hint, or count_few_fits)
    v_mids bigint[];     -- step M: fits after the key, in claim order
    v_mn integer;        -- how many were asked for
    v_mi integer;
    v_mk bigint;
    v_mreq bigint;
    v_mpool text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RETURN;
    END IF;

    -- Due scheduled tasks become queued here, so a delayed task turns
    -- claimable at its run_at with no other process running. Every due task
    -- (a burst of due tasks must not hide a better priority that is due too),
    -- in one pass (version 23). Asked first with a read (version 13): an
    -- UPDATE that changes nothing still opens the table and its indexes.
    IF NOT p_peek AND EXISTS (SELECT 1 FROM tasks s WHERE s.state = 'scheduled' AND s.run_at <= now()) THEN
        UPDATE tasks t SET state = 'queued'
          FROM (SELECT s.id FROM tasks s
                 WHERE s.state = 'scheduled' AND s.run_at <= now()
                 FOR UPDATE SKIP LOCKED) d
         WHERE t.id = d.id;
    END IF;

    -- The head take (version 46): one statement of the naive query's
    -- shape, where an index has the claim order: every queue
    -- (ix_tasks_claim_any, ix_tasks_claim_desc) or one queue ascending
    -- (ix_tasks_claim). Its answer is the claim's. First without a pool's
    -- slot (a data-modifying CTE on pools opens that table even when it
    -- changes nothing), which starts nothing when the first fit has a pool;
    -- then with it. A session whose last head take started a pooled task
    -- goes to the second statement first (taskqueue.head_take = 'p'). A miss
    -- goes on below with nothing changed but the row it may hold (a fit
    -- whose pool filled under its lock, which the general path reaches
    -- first), and skips the head take for the session's next c_hskips
    -- claims, more after each further miss (a pile of tasks too big at the
    -- head, or a hard shape, pays it about once in c_hmax claims). The
    -- setting ('skips:last') is written by assignment, a plain expression,
    -- not by PERFORM, which starts a statement.
    IF p_limit = 1 AND NOT p_peek AND (p_queues IS NULL OR (cardinality(p_queues) = 1 AND NOT p_descending)) THEN
        v_htake := current_setting('taskqueue.head_take', true);
        v_hskip := NULL;
        IF v_htake ~ '^[0-9]{1,3}:[0-9]{1,3}$' THEN
            v_hskip := split_part(v_htake, ':', 1)::integer;
            v_hlast := split_part(v_htake, ':', 2)::integer;
        END IF;
        IF v_htake = 'off' THEN
            NULL;  -- the session asks for the general path alone (its tests, and measures of it)
        ELSIF v_hskip > 0 THEN
            v_htake := set_config('taskqueue.head_take', (v_hskip - 1)::text || ':' || v_hlast::text, false);
        ELSE
            IF v_htake IS DISTINCT FROM 'p' THEN
                IF p_queues IS NOT NULL THEN
                    RETURN QUERY
                    WITH c AS (
                        SELECT x.id, h.pool FROM (
                            SELECT t.id, t.required, t.pool FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                             ORDER BY t.priority, t.id LIMIT c_htake) h
                         CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                              WHERE t.id = h.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                FOR UPDATE SKIP LOCKED) x
                         WHERE h.required <= v_remaining
                           AND NOT (h.pool IS NOT NULL
                                    AND EXISTS (SELECT 1 FROM pools p WHERE p.name = h.pool AND p.running_limit IS NOT NULL
                                                                        AND p.running >= p.running_limit))
                         LIMIT 1)
                    UPDATE tasks t
                       SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = p_worker,
                           lease_token = gen_random_uuid(), lease_seconds = p_lease,
                           lease_expires_at = now() + make_interval(secs => p_lease)
                      FROM c
                     WHERE t.id = c.id AND c.pool IS NULL
                    RETURNING t.*;
                ELSIF p_descending THEN
                    RETURN QUERY
                    WITH c AS (
                        SELECT x.id, h.pool FROM (
                            SELECT t.id, t.required, t.pool FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                             ORDER BY t.priority DESC, t.id LIMIT c_htake) h
                         CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                              WHERE t.id = h.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                FOR UPDATE SKIP LOCKED) x
                         WHERE h.required <= v_remaining
                           AND NOT (h.pool IS NOT NULL
                                    AND EXISTS (SELECT 1 FROM pools p WHERE p.name = h.pool AND p.running_limit IS NOT NULL
                                                                        AND p.running >= p.running_limit))
                         LIMIT 1)
                    UPDATE tasks t
                       SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = p_worker,
                           lease_token = gen_random_uuid(), lease_seconds = p_lease,
                           lease_expires_at = now() + make_interval(secs => p_lease)
                      FROM c
                     WHERE t.id = c.id AND c.pool IS NULL
                    RETURNING t.*;
                ELSE
                    RETURN QUERY
                    WITH c AS (
                        SELECT x.id, h.pool FROM (
                            SELECT t.id, t.required, t.pool FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                             ORDER BY t.priority, t.id LIMIT c_htake) h
                         CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                              WHERE t.id = h.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                FOR UPDATE SKIP LOCKED) x
                         WHERE h.required <= v_remaining
                           AND NOT (h.pool IS NOT NULL
                                    AND EXISTS (SELECT 1 FROM pools p WHERE p.name = h.pool AND p.running_limit IS NOT NULL
                                                                        AND p.running >= p.running_limit))
                         LIMIT 1)
                    UPDATE tasks t
                       SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = p_worker,
                           lease_token = gen_random_uuid(), lease_seconds = p_lease,
                           lease_expires_at = now() + make_interval(secs => p_lease)
                      FROM c
                     WHERE t.id = c.id AND c.pool IS NULL
                    RETURNING t.*;
                END IF;
                IF FOUND THEN
                    IF v_hskip IS NOT NULL THEN
                        v_htake := set_config('taskqueue.head_take', '', false);
                    END IF;
                    RETURN;
                END IF;
            END IF;
            IF p_queues IS NOT NULL THEN
                RETURN QUERY
                WITH c AS (
                    SELECT x.id, h.pool FROM (
                        SELECT t.id, t.required, t.pool FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                         ORDER BY t.priority, t.id LIMIT c_htake) h
                     CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                          WHERE t.id = h.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                            FOR UPDATE SKIP LOCKED) x
                     WHERE h.required <= v_remaining
                       AND NOT (h.pool IS NOT NULL
                                AND EXISTS (SELECT 1 FROM pools p WHERE p.name = h.pool AND p.running_limit IS NOT NULL
                                                                    AND p.running >= p.running_limit))
                     LIMIT 1),
                slot AS (
                    UPDATE pools p SET running = p.running + 1
                      FROM c
                     WHERE p.name = c.pool AND (p.running_limit IS NULL OR p.running < p.running_limit)
                    RETURNING p.name)
                UPDATE tasks t
                   SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = p_worker,
                       lease_token = gen_random_uuid(), lease_seconds = p_lease,
                       lease_expires_at = now() + make_interval(secs => p_lease)
                  FROM c
                 WHERE t.id = c.id AND (c.pool IS NULL OR EXISTS (SELECT 1 FROM slot))
                RETURNING t.*;
            ELSIF p_descending THEN
                RETURN QUERY
                WITH c AS (
                    SELECT x.id, h.pool FROM (
                        SELECT t.id, t.required, t.pool FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                         ORDER BY t.priority DESC, t.id LIMIT c_htake) h
                     CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                          WHERE t.id = h.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                            FOR UPDATE SKIP LOCKED) x
                     WHERE h.required <= v_remaining
                       AND NOT (h.pool IS NOT NULL
                                AND EXISTS (SELECT 1 FROM pools p WHERE p.name = h.pool AND p.running_limit IS NOT NULL
                                                                    AND p.running >= p.running_limit))
                     LIMIT 1),
                slot AS (
                    UPDATE pools p SET running = p.running + 1
                      FROM c
                     WHERE p.name = c.pool AND (p.running_limit IS NULL OR p.running < p.running_limit)
                    RETURNING p.name)
                UPDATE tasks t
                   SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = p_worker,
                       lease_token = gen_random_uuid(), lease_seconds = p_lease,
                       lease_expires_at = now() + make_interval(secs => p_lease)
                  FROM c
                 WHERE t.id = c.id AND (c.pool IS NULL OR EXISTS (SELECT 1 FROM slot))
                RETURNING t.*;
            ELSE
                RETURN QUERY
                WITH c AS (
                    SELECT x.id, h.pool FROM (
                        SELECT t.id, t.required, t.pool FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                         ORDER BY t.priority, t.id LIMIT c_htake) h
                     CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                          WHERE t.id = h.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                            FOR UPDATE SKIP LOCKED) x
                     WHERE h.required <= v_remaining
                       AND NOT (h.pool IS NOT NULL
                                AND EXISTS (SELECT 1 FROM pools p WHERE p.name = h.pool AND p.running_limit IS NOT NULL
                                                                    AND p.running >= p.running_limit))
                     LIMIT 1),
                slot AS (
                    UPDATE pools p SET running = p.running + 1
                      FROM c
                     WHERE p.name = c.pool AND (p.running_limit IS NULL OR p.running < p.running_limit)
                    RETURNING p.name)
                UPDATE tasks t
                   SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = p_worker,
                       lease_token = gen_random_uuid(), lease_seconds = p_lease,
                       lease_expires_at = now() + make_interval(secs => p_lease)
                  FROM c
                 WHERE t.id = c.id AND (c.pool IS NULL OR EXISTS (SELECT 1 FROM slot))
                RETURNING t.*;
            END IF;
            IF FOUND THEN
                IF v_htake IS DISTINCT FROM 'p' THEN
                    v_htake := set_config('taskqueue.head_take', 'p', false);
                END IF;
                RETURN;
            END IF;
            -- A miss: skip the next c_hskips claims, twice as many and one
            -- more after each miss that follows a skip, up to c_hmax.
            v_hlast := CASE WHEN v_hskip IS NULL THEN c_hskips ELSE LEAST(2 * v_hlast + 1, c_hmax) END;
            v_htake := set_config('taskqueue.head_take', v_hlast::text || ':' || v_hlast::text, false);
        END IF;
    END IF;

    IF p_limit = 1 AND NOT p_peek AND NOT p_descending AND p_available >= 0 AND p_available < c_exact
       AND cardinality(p_queues) > 1 THEN
        -- L. A list, ascending, a small amount (version 31): taken like step
        -- S below while the session's hint says the look along the shared
        -- order ran dry for this list (the look finds dense fits cheaper).
        v_hint := NULLIF(current_setting('taskqueue.dry_look', true), '');
        IF v_hint ~ '^[0-9]{1,18}:[0-9]{1,9}:md5:[0-9a-f]{32}$' THEN
            v_hint_amount := split_part(v_hint, ':', 1)::bigint;
            v_hint_n := split_part(v_hint, ':', 2)::integer;
            v_lsmall := split_part(v_hint, ':', 4) = md5(p_queues::text)
                        AND p_available <= v_hint_amount AND v_hint_n < c_dry_skips;
        END IF;
        v_hint := NULL;
    END IF;

    IF v_sarm THEN
        -- Step S from c_exact up (version 43) while the session's hint
        -- 'amount:n' says a claim over every queue for at least this amount
        -- looked in vain and asked fit_candidate, for c_sany_skips claims;
        -- then the general way once again, whose next dry look arms it anew.
        -- Where the fits lie at the head the look is cheaper than a read
        -- per amount, and it never runs dry there.
        v_shint := current_setting('taskqueue.any_size', true);
        v_sany := COALESCE(v_shint ~ '^[0-9]{1,2}:[0-9]{1,3}$'
                           AND p_available <= split_part(v_shint, ':', 1)::integer
                           AND split_part(v_shint, ':', 2)::integer < c_sany_skips, false);
        IF v_sany THEN
            PERFORM set_config('taskqueue.any_size', split_part(v_shint, ':', 1) || ':'
                               || (split_part(v_shint, ':', 2)::integer + 1)::text, false);
        END IF;
    END IF;

    IF p_limit = 1 AND NOT p_peek AND p_available >= 0 AND p_available < c_exact
       AND (p_queues IS NULL OR cardinality(p_queues) = 1 OR v_lsmall) OR v_ffew OR v_sany THEN
        -- S. A small amount (version 26; descending, version 27): every
        -- bucket from 0 to what is available holds tasks of one size that
        -- fits, so the first fitting rows in claim order are among the
        -- first c_head of each bucket (ascending) or among the last.
        -- Read them (no lock), merged in claim order. They are locked in
        -- that order with SKIP LOCKED and the first one locked is started,
        -- with its pool's slot when it has a pool (version 27), as the
        -- look's take does. Its pool full under the lock, or every
        -- candidate taken elsewhere: the general way below, from the start.
        v_small := CASE WHEN NOT v_ffew THEN current_setting('taskqueue.small_skip', true) END;
        IF v_small ~ '^[1-9][0-9]?$' THEN
            PERFORM set_config('taskqueue.small_skip', (v_small::integer - 1)::text, false);
        ELSE
            -- Each bucket is read from its start (ascending) or its end
            -- (descending) as fit_candidate reads it: a row comparison on
            -- (bucket, priority, id) that only the bucket's own index serves.
            -- With "bucket = n", a user's (priority, id) index beside tasks
            -- of one size was chosen instead, and every empty bucket walked
            -- all of it (1,592 buffers at 20,000 tasks, test_foreign_index.py).
            -- A statement for each order, over every queue or one queue, so
            -- each plan starts only its own scan: a first cut of version 27
            -- with both in one statement, gated by one-time filters, cost
            -- 11% more instructions a claim + done than version 26 on
            -- deadlines. No pool is read here (a cut that asked the pools
            -- table for the rows kept cost 3% more on a shape with no
            -- pools, for the subquery's start alone): the take asks a
            -- pooled candidate's pool under its lock (version 27).
            IF v_sany AND NOT v_ffew THEN
                -- Version 43: from c_exact up, the head of the order over
                -- every queue first (c_shead rows at most, stopping at
                -- c_head fits). Where fits are dense there, they are the
                -- first in claim order, as the look would find them, for a
                -- fraction of one read per amount.
                IF p_descending THEN
                    SELECT array_agg(h.id ORDER BY h.priority DESC, h.id), count(*), bool_or(h.pool IS NOT NULL)
                      INTO v_cands, v_nfit, v_pooled
                      FROM (SELECT h.id, h.priority, h.pool
                              FROM (SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                                     WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                     ORDER BY t.priority DESC, t.id LIMIT c_shead) h
                             WHERE h.required <= p_available LIMIT c_head) h;
                ELSE
                    SELECT array_agg(h.id ORDER BY h.priority, h.id), count(*), bool_or(h.pool IS NOT NULL)
                      INTO v_cands, v_nfit, v_pooled
                      FROM (SELECT h.id, h.priority, h.pool
                              FROM (SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                                     WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                     ORDER BY t.priority, t.id LIMIT c_shead) h
                             WHERE h.required <= p_available LIMIT c_head) h;
                END IF;
            END IF;
            IF v_nfit > 0 THEN
                NULL;  -- the head's fits are the candidates
            ELSIF v_ffew THEN
                -- F (version 37): every fit read whole, its first c_head in
                -- claim order; NULL past the budget (the general way). Each
                -- candidate's pool is asked under its lock by the take.
                v_cands := few_fits(p_queues, p_available, v_lk, v_lid, p_descending, '{}', c_fhead);
                v_nfit := cardinality(v_cands);  -- NULL past the budget
                v_pooled := true;
            ELSIF p_descending AND p_queues IS NULL THEN
                -- Read backward, a bucket's rows come in (priority DESC, id
                -- DESC): one that gave c_head rows may hold more of the lowest
                -- priority it read (its cut). The rows above the highest cut
                -- (top) are every fit of their priorities, so only they are
                -- candidates (version 27).
                SELECT array_agg(k.id ORDER BY k.priority DESC, k.id) FILTER (WHERE k.top IS NULL OR k.priority > k.top),
                       count(*),
                       bool_or(k.pool IS NOT NULL) FILTER (WHERE k.top IS NULL OR k.priority > k.top),
                       max(k.top)
                  INTO v_cands, v_nfit, v_pooled, v_top
                  FROM (SELECT r.id, r.priority, r.pool, max(r.cut) OVER () AS top
                          FROM generate_series(0, p_available::integer) AS b(n)
                         CROSS JOIN LATERAL (
                               SELECT x.id, x.priority, x.pool,
                                      CASE WHEN count(*) OVER () = c_head THEN min(x.priority) OVER () END AS cut
                                 FROM (SELECT t.id, t.priority, t.pool FROM tasks t
                                        WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < c_sany
                                          AND (t.required, t.priority, t.id) < (b.n + 1, -2147483648, 0)
                                          AND t.required >= b.n
                                        ORDER BY t.required DESC, t.priority DESC, t.id DESC LIMIT c_head) x) r
                         ORDER BY r.priority DESC, r.id LIMIT c_head) k;
            ELSIF p_descending THEN
                SELECT array_agg(k.id ORDER BY k.priority DESC, k.id) FILTER (WHERE k.top IS NULL OR k.priority > k.top),
                       count(*),
                       bool_or(k.pool IS NOT NULL) FILTER (WHERE k.top IS NULL OR k.priority > k.top),
                       max(k.top)
                  INTO v_cands, v_nfit, v_pooled, v_top
                  FROM (SELECT r.id, r.priority, r.pool, max(r.cut) OVER () AS top
                          FROM generate_series(0, p_available::integer) AS b(n)
                         CROSS JOIN LATERAL (
                               SELECT x.id, x.priority, x.pool,
                                      CASE WHEN count(*) OVER () = c_head THEN min(x.priority) OVER () END AS cut
                                 FROM (SELECT t.id, t.priority, t.pool FROM tasks t
                                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                                          AND (t.bucket, t.priority, t.id) < (b.n + 1, -2147483648, 0)
                                          AND t.bucket >= b.n
                                        ORDER BY t.bucket DESC, t.priority DESC, t.id DESC LIMIT c_head) x) r
                         ORDER BY r.priority DESC, r.id LIMIT c_head) k;
            ELSIF v_lsmall THEN
                -- Step L (version 31): each bucket's first c_lwalk rows over
                -- every queue, the listed queues' kept up to the cut (the
                -- smallest last key of a bucket read to its budget): every
                -- listed fit before it was read. v_nfit counts every row
                -- read, so 0 means no queue has a fitting task.
                SELECT (array_agg(r.id ORDER BY r.priority, r.id) FILTER (WHERE r.kept))[1:c_head],
                       count(*), bool_or(r.pool IS NOT NULL) FILTER (WHERE r.kept), bool_or(r.cut IS NOT NULL)
                  INTO v_cands, v_nfit, v_pooled, v_lcut
                  FROM (SELECT x.id, x.priority, x.pool, x.cut,
                               x.listed AND (x.cut IS NULL OR ARRAY[x.priority::bigint, x.id] <= x.cut) AS kept
                          FROM (SELECT y.id, y.priority, y.pool, y.listed, min(y.last) OVER () AS cut
                                  FROM generate_series(0, p_available::integer) AS b(n)
                                 CROSS JOIN LATERAL (
                                       SELECT z.id, z.priority, z.pool, z.listed,
                                              CASE WHEN count(*) OVER () = c_lwalk
                                                   THEN max(ARRAY[z.priority::bigint, z.id]) OVER () END AS last
                                         FROM (SELECT t.id, t.priority, t.pool,
                                                      t.queue IN (SELECT u.q FROM unnest(p_queues) AS u(q)) AS listed
                                                 FROM tasks t
                                                WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < 16
                                                  AND (t.required, t.priority, t.id) > (b.n, -2147483648, 0) AND t.required <= b.n
                                                ORDER BY t.required, t.priority, t.id LIMIT c_lwalk) z) y) x) r;
            ELSIF p_queues IS NULL THEN
                SELECT array_agg(k.id ORDER BY k.priority, k.id), count(*), bool_or(k.pool IS NOT NULL)
                  INTO v_cands, v_nfit, v_pooled
                  FROM (SELECT s.id, s.priority, s.pool
                          FROM generate_series(0, p_available::integer) AS b(n)
                         CROSS JOIN LATERAL (
                               SELECT t.id, t.priority, t.pool FROM tasks t
                                WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < c_sany
                                  AND (t.required, t.priority, t.id) > (b.n, -2147483648, 0) AND t.required <= b.n
                                ORDER BY t.required, t.priority, t.id LIMIT c_head) s
                         ORDER BY s.priority, s.id LIMIT c_head) k;
            ELSE
                SELECT array_agg(k.id ORDER BY k.priority, k.id), count(*), bool_or(k.pool IS NOT NULL)
                  INTO v_cands, v_nfit, v_pooled
                  FROM (SELECT s.id, s.priority, s.pool
                          FROM generate_series(0, p_available::integer) AS b(n)
                         CROSS JOIN LATERAL (
                               SELECT t.id, t.priority, t.pool FROM tasks t
                                WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                                  AND (t.bucket, t.priority, t.id) > (b.n, -2147483648, 0) AND t.bucket <= b.n
                                ORDER BY t.bucket, t.priority, t.id LIMIT c_head) s
                         ORDER BY s.priority, s.id LIMIT c_head) k;
            END IF;
            IF v_nfit = 0 THEN
                RETURN;  -- no claimable task fits
            END IF;
            IF v_lsmall AND v_cands IS NULL THEN
                IF NOT v_lcut THEN
                    RETURN;  -- every fitting bucket was read whole: no listed task fits
                END IF;
                -- The listed queues' fits lie past the cut (other queues'
                -- small tasks come first): the general way, and the session
                -- skips step L (and S) for its next c_lskips small claims,
                -- so such a read in vain costs 1 claim in 100 (a statement,
                -- never a row).
                PERFORM set_config('taskqueue.small_skip', c_lskips::text, false);
            END IF;
            IF p_descending AND v_cands IS NULL AND NOT v_ffew THEN
                -- Nothing above the cut: v_top is the best priority that
                -- fits, and it fills a bucket. Each bucket's first c_head
                -- rows from (bucket, v_top, 0) forward are its oldest of
                -- v_top (version 28), and merged by id their first c_head
                -- are the first in claim order: a bucket that gave c_head
                -- alone holds c_head ids below any it did not give. Only
                -- rows of v_top are kept (a better priority committed since
                -- the first read comes after them in its bucket).
                IF p_queues IS NULL THEN
                    SELECT array_agg(k.id ORDER BY k.id), bool_or(k.pool IS NOT NULL)
                      INTO v_cands, v_pooled
                      FROM (SELECT x.id, x.pool
                              FROM generate_series(0, p_available::integer) AS b(n)
                             CROSS JOIN LATERAL (
                                   SELECT t.id, t.priority, t.pool FROM tasks t
                                    WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < c_sany
                                      AND (t.required, t.priority, t.id) > (b.n, v_top, 0) AND t.required <= b.n
                                    ORDER BY t.required, t.priority, t.id LIMIT c_head) x
                             WHERE x.priority = v_top
                             ORDER BY x.id LIMIT c_head) k;
                ELSE
                    SELECT array_agg(k.id ORDER BY k.id), bool_or(k.pool IS NOT NULL)
                      INTO v_cands, v_pooled
                      FROM (SELECT x.id, x.pool
                              FROM generate_series(0, p_available::integer) AS b(n)
                             CROSS JOIN LATERAL (
                                   SELECT t.id, t.priority, t.pool FROM tasks t
                                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                                      AND (t.bucket, t.priority, t.id) > (b.n, v_top, 0) AND t.bucket <= b.n
                                    ORDER BY t.bucket, t.priority, t.id LIMIT c_head) x
                             WHERE x.priority = v_top
                             ORDER BY x.id LIMIT c_head) k;
                END IF;
            END IF;
            IF cardinality(v_cands) > 0 THEN
                -- The first candidate no one has locked is locked and
                -- started; with a pooled candidate among them, its pool's
                -- slot is taken in the same statement, as the look takes it
                -- (a pool found full under its lock starts nothing, and the
                -- general way then asks that pool first, from the start).
                IF v_pooled THEN
                    RETURN QUERY
                    WITH c AS (
                        SELECT x.id, x.pool FROM unnest(v_cands) AS u(id)
                         CROSS JOIN LATERAL (SELECT t.id, t.pool FROM tasks t
                                              WHERE t.id = u.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                FOR UPDATE SKIP LOCKED) x
                         LIMIT 1),
                    slot AS (
                        UPDATE pools p SET running = p.running + 1
                          FROM c
                         WHERE p.name = c.pool AND (p.running_limit IS NULL OR p.running < p.running_limit)
                        RETURNING p.name)
                    UPDATE tasks t
                       SET state = 'running',
                           attempts = t.attempts + 1,
                           started_at = now(),
                           worker = p_worker,
                           lease_token = gen_random_uuid(),
                           lease_seconds = p_lease,
                           lease_expires_at = now() + make_interval(secs => p_lease)
                      FROM c
                     WHERE t.id = c.id AND (c.pool IS NULL OR EXISTS (SELECT 1 FROM slot))
                    RETURNING t.*;
                ELSE
                    RETURN QUERY
                    WITH c AS (
                        SELECT x.id FROM unnest(v_cands) AS u(id)
                         CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                              WHERE t.id = u.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                FOR UPDATE SKIP LOCKED) x
                         LIMIT 1)
                    UPDATE tasks t
                       SET state = 'running',
                           attempts = t.attempts + 1,
                           started_at = now(),
                           worker = p_worker,
                           lease_token = gen_random_uuid(),
                           lease_seconds = p_lease,
                           lease_expires_at = now() + make_interval(secs => p_lease)
                      FROM c
                     WHERE t.id = c.id
                    RETURNING t.*;
                END IF;
                IF FOUND THEN
                    IF v_lsmall THEN
                        -- Step L stands in for the look the hint skips: count it.
                        PERFORM set_config('taskqueue.dry_look', v_hint_amount::text || ':' || (v_hint_n + 1)::text
                                           || ':md5:' || md5(p_queues::text), false);
                    END IF;
                    RETURN;
                END IF;
                IF v_ffew THEN
                    -- F: the general way passes and parks what stopped the
                    -- take; step F waits until a read of the fits finds them
                    -- few again (fit_candidate reads them when it is asked).
                    -- Over every queue this claim counts them at its first
                    -- dry look (version 41), as a claim with no hint does,
                    -- rather than walk the shared order to the far end.
                    PERFORM set_config('taskqueue.fit_scan', '', false);
                    v_probe := p_queues IS NULL;
                ELSIF v_pooled THEN
                    -- The first candidate this call could lock is in a full
                    -- pool (or every one is held elsewhere): the general way
                    -- passes it and parks it; a statement in vain for the
                    -- next claims too.
                    PERFORM set_config('taskqueue.small_skip', c_dry_skips::text, false);
                END IF;
            END IF;
            v_cands := NULL;
            v_nfit := NULL;
            v_pooled := NULL;
        END IF;
    END IF;

    v_queues := p_queues;
    IF v_gdesc THEN
        -- Every queue, descending (version 21): is there one queue with
        -- claimable tasks, or several (two probes)? One: the claim goes on as
        -- that queue's, with its hint and look (version 34), as when all queues
        -- were listed here. Several: windows over every queue, no list yet.
        v_queues := claimable_queues(NULL, 2);
        v_stop := v_queues IS NULL;
        IF cardinality(v_queues) = 1 THEN
            v_gdesc := false;
            v_listed := true;
        ELSE
            v_queues := NULL;
            -- The session's count of queues at its last listing, as the
            -- ascending look reads it: the first window may walk as far as
            -- step W would before the buckets, so a pile at the head costs
            -- no listing (it stops at the first fit, read lazily).
            v_qhint := current_setting('taskqueue.queue_count', true);
            IF v_qhint ~ '^[0-9]{1,6}$' THEN
                v_qcount := v_qhint::integer;
            END IF;
            IF v_qcount > 1 AND v_window THEN
                v_gcap := GREATEST(c_scan, v_qcount * 8 * required_class((LEAST(v_remaining, 2147483646) + 1)::integer));
            END IF;
        END IF;
    END IF;


    IF p_limit = 1 AND NOT p_peek THEN
        -- The session's hint, read once for step H (version 14):
        -- 'amount:skips:key' after a look found nothing
        -- that fits. A value that does not read so (set by hand, say) is
        -- cleared, never parsed (version 11), so it cannot make a claim fail.
        v_hint := NULLIF(current_setting('taskqueue.dry_look', true), '');
        IF v_hint IS NOT NULL AND v_hint !~ '^[0-9]{1,18}:[0-9]{1,9}:.' THEN
            PERFORM set_config('taskqueue.dry_look', '', false);
            v_hint := NULL;
        END IF;
        IF v_hint IS NOT NULL THEN
            v_hint_amount := split_part(v_hint, ':', 1)::bigint;
            v_hint_n := split_part(v_hint, ':', 2)::integer;
            v_hint_key := substr(v_hint, length(split_part(v_hint, ':', 1)) + length(split_part(v_hint, ':', 2)) + 3);
        END IF;
    END IF;

    -- One task, descending, one queue (version 34): the look (step H), as
    -- in the other order. Step D (version 14) read a window of two
    -- priorities at most, then the buckets.
    v_odesc := p_limit = 1 AND p_descending AND NOT p_peek AND v_window AND cardinality(v_queues) = 1;

    IF p_limit = 1 AND NOT p_peek AND (NOT p_descending OR v_gdesc OR v_ldesc OR v_odesc) THEN
        -- H. One task, ascending, or descending over every queue (version
        -- 21), a list (version 22) or one queue (version 34): the look (version 10). One statement reads
        -- claim order on from the last settled key, up to v_look rows, and
        -- stops as soon as c_head (8) of the rows it read fit; the first of
        -- those that have no pool and come before any fitting pooled row,
        -- and that no one has locked, is locked and started in one
        -- statement. A look costs what the naive query costs per row read (a
        -- plain index walk with a filter, no cursor, no call per row), and
        -- its budget, 32 rows per class below what is left + 1, is about
        -- what asking the buckets costs. So a head with a prefix of tasks
        -- too big for this claim, short or long, costs at most about twice
        -- the cheaper of the naive walk and the buckets (version 9 read 8
        -- rows, then a 64-row cursor window, then the buckets).
        -- One queue, when the look finds nothing that fits: the buckets find
        -- the next task that fits (fit_candidate), and the look runs again
        -- from it, so concurrent claims that the buckets sent to the same
        -- task each take one of the 8 fits after it in one statement, where
        -- version 9 lost the race in take_task and walked on through a cursor.
        -- Several queues: the look reads the order over every queue and
        -- keeps its own rows (mine); with nothing of its own that fits, each
        -- listed queue's own window comes next, then W and the buckets.
        -- Every queue: the rows looked at count towards W's walk; when only
        -- one queue holds claimable tasks, the claim goes on as that queue's.
        v_class := required_class((LEAST(v_remaining, 2147483646) + 1)::integer);
        v_look := GREATEST(c_head, c_look * v_class);
        IF v_several OR v_ldesc THEN
            -- Several listed queues: the look walks the shared order as far
            -- as their buckets are worth (c_walk rows a queue for each class)
            -- at once, so a walk that finds nothing reads its last key once.
            -- Descending, the buckets cost twice as many probes (version 45).
            v_look := GREATEST(v_look, cardinality(v_queues) * CASE WHEN v_ldesc THEN c_dwalk ELSE c_walk END * v_class);
        END IF;
        v_round := 0;
        -- The session's hint (version 10): 'amount:skips:queue' after a look
        -- of one queue ('*': every queue, one of which had tasks) found
        -- nothing that fits. While the amount left is no larger, the pile is
        -- at least as long, so the next c_dry_skips claims skip the look;
        -- then one looks again, and a look that finds a fit clears the hint.
        -- In a pile that grows by one task a claim (each takes the oldest
        -- task that fits), a look past its budget is a statement in vain.
        v_key := CASE WHEN v_several THEN 'md5:' || md5(v_queues::text)
                      WHEN v_ldesc THEN 'dmd5:' || md5(v_queues::text)  -- descending (version 22)
                      WHEN v_odesc THEN 'desc:' || v_queues[1]  -- step D's key (version 14)
                      ELSE COALESCE(v_queues[1], '*') END;
        v_skip := COALESCE(v_hint_key = v_key AND v_remaining <= v_hint_amount AND v_hint_n < c_dry_skips
                           AND (NOT v_several OR v_window OR v_remaining < c_exact), false) AND NOT v_gdesc;
        IF v_several THEN
            v_okey := 'own:' || substr(v_key, 5);  -- the same md5 of the list
        END IF;
        IF v_skip THEN
            PERFORM set_config('taskqueue.dry_look', v_hint_amount::text || ':' || (v_hint_n + 1)::text || ':' || v_key, false);
        ELSIF v_several THEN
            IF COALESCE(v_hint_key = v_okey AND v_remaining <= v_hint_amount AND v_hint_n < c_dry_skips
                        AND v_window, false) THEN
                -- The list's own windows ran dry too (version 17): past the
                -- look and those windows to the buckets, from the start of
                -- the order.
                PERFORM set_config('taskqueue.dry_look', v_hint_amount::text || ':' || (v_hint_n + 1)::text || ':' || v_okey, false);
                v_skip := true;
                v_window := false;
            END IF;
        END IF;
        IF v_global OR v_gdesc THEN
            -- The session's count of queues with claimable tasks at its last
            -- listing (version 11); anything else is not ours and counts 0.
            -- Descending, it was read at the start (version 21).
            IF v_global THEN
                v_qhint := current_setting('taskqueue.queue_count', true);
                IF v_qhint ~ '^[0-9]{1,6}$' THEN
                    v_qcount := v_qhint::integer;
                END IF;
            END IF;
            IF v_qcount > 1 AND v_remaining >= c_exact THEN
                -- Several queues last time: the first look may walk as far as
                -- step W would before the buckets (it stops at the first fits).
                -- Below c_exact the buckets of every queue cost one queue's
                -- (version 20).
                v_look := GREATEST(v_look, v_qcount * c_walk * v_class);
                IF v_probe THEN
                    -- (version 39) A look that may walk that far asks first
                    -- whether every queue's fits are few: if so, step F's
                    -- hint is set and the look starts at the first of them.
                    v_probe := false;
                    IF count_few_fits(v_remaining) THEN
                        v_cands := few_fits(NULL, v_remaining, v_lk, v_lid, p_descending, v_full, 1);
                        IF cardinality(v_cands) = 0 THEN
                            RETURN;  -- no claimable task fits
                        ELSIF v_cands IS NOT NULL THEN
                            SELECT CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END
                              INTO v_lk FROM tasks t WHERE t.id = v_cands[1];
                            v_lid := v_cands[1] - 1;
                            v_look := c_scan;
                        END IF;
                    END IF;
                END IF;
            END IF;
        END IF;
        <<look>>
        LOOP
            IF v_walk THEN
                v_walk := false;  -- a longer walk over every queue, in the same round
            ELSE
                v_round := v_round + 1;
            END IF;
            IF v_round = 1 AND v_skip THEN
                -- The last look of this session for this queue (or every
                -- queue) and at least this amount ran dry: to the buckets at
                -- once (the hint skips a statement, never a row).
                IF v_odesc THEN
                    -- One queue, descending (version 14): the buckets start
                    -- inside the best priority (one descent), where a probe
                    -- from before every priority first asks which is next,
                    -- a second descent for each level.
                    v_lk := COALESCE(-(SELECT max(t.priority) FROM tasks t
                                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1])::bigint, v_lk);
                    v_window := false;
                    EXIT look;  -- the general path: the buckets, then the task they found
                END IF;
                IF v_several THEN
                    -- A list (version 14): to each listed queue's own window,
                    -- from the start, as after a dry look of its budget.
                    v_walked := v_look;
                    v_lwalk := false;
                    EXIT look;
                END IF;
                IF v_global AND v_remaining >= c_exact THEN  -- below it: every queue's buckets (version 20)
                    v_queues := claimable_queues(NULL, c_list);
                    v_listed := true;
                    v_more := cardinality(v_queues) >= c_list;
                    IF cardinality(v_queues) IS DISTINCT FROM 1 THEN
                        PERFORM set_config('taskqueue.dry_look', '', false);
                        v_skip := false;
                        v_round := 0;
                        CONTINUE look;  -- not the queue the hint was learnt on: look after all
                    END IF;
                    v_global := false;
                END IF;
            ELSE
                -- The rows that fit, 8 at most, and their places among the fits
                -- (version 11: the rows read are no longer numbered, which cost
                -- as much as reading them; measured over a pile of 1,500 rows,
                -- 623 us against 331 us). Only when nothing fits does the same
                -- statement read the budget's last key, so the next step goes
                -- on after it (NULL: the order ended within the budget); one
                -- statement, one snapshot, so no row is passed over unread.
                -- Two statements, not one with a branch per order, so each plan
                -- starts only its own index scan.
                IF v_gdesc OR v_ldesc THEN
                    -- Descending over every queue (version 21), or over a
                    -- list, keeping its rows (version 22): the rest of the
                    -- current priority from ix_tasks_claim_any, then the
                    -- lower ones from ix_tasks_claim_desc (priority DESC,
                    -- id), a plain walk as in the other order (version 22);
                    -- k1 is -priority, so the keys ascend as in the other
                    -- order. It read all it may when it read v_dlook rows
                    -- (its budget; a quarter of it over every queue, c_span),
                    -- else the order ended; its last key is then the
                    -- largest read.
                    v_dlook := CASE WHEN v_gdesc THEN GREATEST(c_head, v_look / c_span) ELSE v_look END;
                    SELECT array_agg(y.id ORDER BY y.k1, y.id) FILTER (WHERE NOT y.full),
                           count(*),
                           (max(ARRAY[y.k1, y.id]))[1], (max(ARRAY[y.k1, y.id]))[2],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[1],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[2],
                           array_agg(y.id) FILTER (WHERE y.full),
                           array_agg(y.pool) FILTER (WHERE y.full),
                           CASE WHEN count(*) = 0 THEN
                               (SELECT CASE WHEN count(*) >= v_dlook
                                            THEN max(ARRAY[e.k1, e.id]) END
                                  FROM (SELECT z.* FROM (
                                           (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool, t.queue FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                               AND (t.priority, t.id) > ((-v_lk)::integer, v_lid)
                                               AND t.priority <= (-v_lk)::integer
                                             ORDER BY t.priority, t.id LIMIT v_dlook)
                                           UNION ALL
                                           (SELECT t.id, -t.priority::bigint, t.required, t.pool, t.queue FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                               AND t.priority < (-v_lk)::integer
                                             ORDER BY t.priority DESC, t.id LIMIT v_dlook)) z
                                         LIMIT v_dlook) e) END
                      INTO v_cands, v_nfit, v_hk, v_hid, v_pk, v_pid, v_fulls, v_fpools, v_end_key
                      FROM (SELECT x.id, x.k1, x.pool,
                                           (x.pool IS NOT NULL
                                            AND EXISTS (SELECT 1 FROM pools p
                                                         WHERE p.name = x.pool AND p.running_limit IS NOT NULL
                                                           AND p.running >= p.running_limit)) AS full
                                      FROM (SELECT z.* FROM (
                                           (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool, t.queue FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                               AND (t.priority, t.id) > ((-v_lk)::integer, v_lid)
                                               AND t.priority <= (-v_lk)::integer
                                             ORDER BY t.priority, t.id LIMIT v_dlook)
                                           UNION ALL
                                           (SELECT t.id, -t.priority::bigint, t.required, t.pool, t.queue FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                               AND t.priority < (-v_lk)::integer
                                             ORDER BY t.priority DESC, t.id LIMIT v_dlook)) z
                                             LIMIT v_dlook) x
                                     WHERE x.required <= v_remaining AND (v_gdesc OR x.queue IN (SELECT u.q FROM unnest(v_queues) AS u(q)))
                                     LIMIT c_head) y;
                ELSIF v_odesc THEN
                    -- One queue, descending (version 34): claim order is
                    -- (priority DESC, id), which ix_tasks_claim (queue,
                    -- priority, id) does not have. First the rest of the
                    -- current priority and the next one (g), each in id
                    -- order, as a statement of its own, at most c_scan (64)
                    -- rows with a small plan: most claims on a dense head
                    -- end there (every task its own priority and every one
                    -- fitting: 0.52 ms of server time a claim, against 0.88
                    -- for one statement whose plan starts every part). With
                    -- no fit among them, the walk below reads them again.
                    WITH g AS (
                        SELECT s.priority FROM tasks s
                         WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_queues[1]
                           AND s.priority < (-v_lk)::integer
                         ORDER BY s.priority DESC LIMIT 1)
                    SELECT array_agg(y.id ORDER BY y.k1, y.id) FILTER (WHERE NOT y.full),
                           count(*),
                           (max(ARRAY[y.k1, y.id]))[1], (max(ARRAY[y.k1, y.id]))[2],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[1],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[2],
                           array_agg(y.id) FILTER (WHERE y.full),
                           array_agg(y.pool) FILTER (WHERE y.full),
                           NULL::bigint[]
                      INTO v_cands, v_nfit, v_hk, v_hid, v_pk, v_pid, v_fulls, v_fpools, v_end_key
                      FROM (SELECT x.id, x.k1, x.pool,
                                           (x.pool IS NOT NULL
                                            AND EXISTS (SELECT 1 FROM pools p
                                                         WHERE p.name = x.pool AND p.running_limit IS NOT NULL
                                                           AND p.running >= p.running_limit)) AS full
                                      FROM (SELECT z.* FROM (
                                           (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                               AND (t.priority, t.id) > ((-v_lk)::integer, v_lid)
                                               AND t.priority <= (-v_lk)::integer
                                             ORDER BY t.priority, t.id LIMIT c_scan)
                                           UNION ALL
                                           (SELECT t.id, -t.priority::bigint, t.required, t.pool
                                              FROM g CROSS JOIN LATERAL (
                                                   SELECT t.* FROM tasks t
                                                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                                      AND t.priority >= g.priority AND t.priority <= g.priority
                                                    ORDER BY t.priority, t.id LIMIT c_scan) t)) z
                                         LIMIT c_scan) x
                                     WHERE x.required <= v_remaining
                                     LIMIT c_head) y;
                    IF v_nfit = 0 THEN
                        -- Version 35: a walk backwards (w), which is claim
                        -- order but for ids within a priority: its first
                        -- c_head fits, within v_look rows, stopping at the
                        -- last of them as the naive query stops at its
                        -- first. Every fit of a priority above the lowest
                        -- one w kept (lo) is among them, in whole; that
                        -- lowest priority's own fits come from a read of it
                        -- forward (f), in id order, v_look rows at most.
                        -- Together, the first fits in claim order. Nothing
                        -- in y: its end key is the start of lo's priority
                        -- (w kept fits there, f read too few rows to reach
                        -- them), else the start of the priority of the
                        -- budget's last row, else the order ended. Version
                        -- 34 sorted chunks read backwards, 8 rows doubling
                        -- to 512, which read up to twice a pile and sorted
                        -- it: every task its own priority, half fitting,
                        -- shuffled, 0.68x the naive query (r12 of the
                        -- random draw), which walks the pile once.
                        WITH w AS MATERIALIZED (
                            SELECT x.id, x.p, x.pool FROM (
                                SELECT t.id, t.priority AS p, t.required, t.pool FROM tasks t
                                 WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                   AND t.priority <= (-v_lk)::integer
                                   AND (t.priority < (-v_lk)::integer OR t.id > v_lid)
                                 ORDER BY t.priority DESC, t.id DESC LIMIT v_look) x
                             WHERE x.required <= v_remaining
                             LIMIT c_head),
                        lo AS (SELECT min(w.p) AS p FROM w)
                        SELECT array_agg(y.id ORDER BY y.k1, y.id) FILTER (WHERE NOT y.full),
                               count(*),
                               (max(ARRAY[y.k1, y.id]))[1], (max(ARRAY[y.k1, y.id]))[2],
                               (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[1],
                               (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[2],
                               array_agg(y.id) FILTER (WHERE y.full),
                               array_agg(y.pool) FILTER (WHERE y.full),
                               CASE WHEN count(*) = 0 THEN
                                   COALESCE((SELECT ARRAY[-lo.p::bigint, 0::bigint] FROM lo WHERE lo.p IS NOT NULL),
                                            (SELECT ARRAY[-e.priority::bigint, 0::bigint] FROM tasks e
                                              WHERE e.state = 'queued' AND NOT e.parked AND e.queue = v_queues[1]
                                                AND e.priority <= (-v_lk)::integer
                                                AND (e.priority < (-v_lk)::integer OR e.id > v_lid)
                                              ORDER BY e.priority DESC, e.id DESC OFFSET v_look - 1 LIMIT 1)) END
                          INTO v_cands, v_nfit, v_hk, v_hid, v_pk, v_pid, v_fulls, v_fpools, v_end_key
                          FROM (SELECT x.id, x.k1, x.pool,
                                       (x.pool IS NOT NULL
                                        AND EXISTS (SELECT 1 FROM pools p
                                                     WHERE p.name = x.pool AND p.running_limit IS NOT NULL
                                                       AND p.running >= p.running_limit)) AS full
                                  FROM ((SELECT w.id, -w.p::bigint AS k1, w.pool FROM w
                                          WHERE w.p > (SELECT lo.p FROM lo))
                                        UNION ALL
                                        (SELECT f.id, -f.priority::bigint, f.pool
                                           FROM (SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                                    AND t.priority = (SELECT lo.p FROM lo)
                                                    AND (t.priority < (-v_lk)::integer OR t.id > v_lid)
                                                  ORDER BY t.priority, t.id LIMIT v_look) f
                                          WHERE f.required <= v_remaining
                                          LIMIT c_head)) x
                                 ORDER BY x.k1, x.id
                                 LIMIT c_head) y;
                    END IF;
                ELSIF v_global OR v_lwalk THEN
                    SELECT array_agg(y.id ORDER BY y.k1, y.id) FILTER (WHERE NOT y.full),
                           count(*),
                           (max(ARRAY[y.k1, y.id]))[1], (max(ARRAY[y.k1, y.id]))[2],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[1],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[2],
                           array_agg(y.id) FILTER (WHERE y.full),
                           array_agg(y.pool) FILTER (WHERE y.full),
                           CASE WHEN count(*) = 0 THEN
                               (SELECT ARRAY[e.priority::bigint, e.id] FROM tasks e
                                 WHERE e.state = 'queued' AND NOT e.parked AND e.id > 0
                                   AND (e.priority, e.id) > (v_lk::integer, v_lid)
                                 ORDER BY e.priority, e.id OFFSET v_look - 1 LIMIT 1) END
                      INTO v_cands, v_nfit, v_hk, v_hid, v_pk, v_pid, v_fulls, v_fpools, v_end_key
                      FROM (SELECT x.id, x.k1, x.pool,
                                           (x.pool IS NOT NULL
                                            AND EXISTS (SELECT 1 FROM pools p
                                                         WHERE p.name = x.pool AND p.running_limit IS NOT NULL
                                                           AND p.running >= p.running_limit)) AS full
                                      FROM (SELECT t.id, t.priority::bigint AS k1, t.required, t.pool, t.queue FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                               AND (t.priority, t.id) > (v_lk::integer, v_lid)
                                             ORDER BY t.priority, t.id LIMIT v_look) x
                                     WHERE x.required <= v_remaining AND (v_global OR x.queue IN (SELECT u.q FROM unnest(v_queues) AS u(q)))
                                     LIMIT c_head) y;
                ELSE
                    SELECT array_agg(y.id ORDER BY y.k1, y.id) FILTER (WHERE NOT y.full),
                           count(*),
                           (max(ARRAY[y.k1, y.id]))[1], (max(ARRAY[y.k1, y.id]))[2],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[1],
                           (min(ARRAY[y.k1, y.id]) FILTER (WHERE y.pool IS NOT NULL AND NOT y.full))[2],
                           array_agg(y.id) FILTER (WHERE y.full),
                           array_agg(y.pool) FILTER (WHERE y.full),
                           CASE WHEN count(*) = 0 THEN
                               (SELECT ARRAY[e.priority::bigint, e.id] FROM tasks e
                                 WHERE e.state = 'queued' AND NOT e.parked AND e.queue = v_queues[1]
                                   AND (e.priority, e.id) > (v_lk::integer, v_lid)
                                 ORDER BY e.priority, e.id OFFSET v_look - 1 LIMIT 1) END
                      INTO v_cands, v_nfit, v_hk, v_hid, v_pk, v_pid, v_fulls, v_fpools, v_end_key
                      FROM (SELECT x.id, x.k1, x.pool,
                                           (x.pool IS NOT NULL
                                            AND EXISTS (SELECT 1 FROM pools p
                                                         WHERE p.name = x.pool AND p.running_limit IS NOT NULL
                                                           AND p.running >= p.running_limit)) AS full
                                      FROM (SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                               AND (t.priority, t.id) > (v_lk::integer, v_lid)
                                             ORDER BY t.priority, t.id LIMIT v_look) x
                                     WHERE x.required <= v_remaining
                                     LIMIT c_head) y;
                END IF;
                IF v_round = 1 AND v_nfit > 0 AND v_hint IS NOT NULL THEN
                    PERFORM set_config('taskqueue.dry_look', '', false);  -- the pile is gone
                    v_hint := NULL;
                END IF;
                v_hit := v_end_key IS NOT NULL;
                IF v_hit THEN
                    v_hk := v_end_key[1];
                    v_hid := v_end_key[2];
                END IF;
                -- The candidates: every fit read whose pool was not full,
                -- pooled or not (version 12; before, only the fits ahead of
                -- the first pooled one, and the general path took that one).
                -- With 8 consumers at one head, a claim that loses the first
                -- candidate takes the next, as the naive query's SKIP LOCKED
                -- walk does.
                v_pooled := v_pid IS NOT NULL;
                IF v_fulls IS NOT NULL THEN
                    -- Fits whose pool was full when read: passed over, their
                    -- pools known full for the rest of the call (as the
                    -- windows learn them), the rows parked (park_rows
                    -- re-checks each pool under its lock).
                    v_full := v_full || ARRAY(SELECT DISTINCT f.name FROM unnest(v_fpools) AS f(name) WHERE f.name <> ALL (v_full));
                    v_park := v_park || v_fulls[1:GREATEST(c_park - cardinality(v_park), 0)];
                END IF;
                IF cardinality(v_cands) > 0 THEN
                    -- The first candidate no one has locked is locked and
                    -- started, with its pool's slot taken in the same
                    -- statement when it has a pool: the row first, then the
                    -- pool (take_task's order), and this is the first pool row
                    -- the call locks, so it may be waited for. A pool found
                    -- full under its lock starts nothing, and the general path
                    -- goes on from just before the first pooled candidate: at
                    -- or before the task this transaction now holds, whose
                    -- pool it then asks first (every candidate ahead of that
                    -- task was locked elsewhere). With no pooled candidate,
                    -- the statement without the pool's UPDATE (version 11's):
                    -- a data-modifying CTE runs, and opens its table, even
                    -- when it changes nothing.
                    IF v_pooled THEN
                        RETURN QUERY
                        WITH c AS (
                            SELECT x.id, x.pool FROM unnest(v_cands) AS u(id)
                             CROSS JOIN LATERAL (SELECT t.id, t.pool FROM tasks t
                                                  WHERE t.id = u.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                    FOR UPDATE SKIP LOCKED) x
                             LIMIT 1),
                        slot AS (
                            UPDATE pools p SET running = p.running + 1
                              FROM c
                             WHERE p.name = c.pool AND (p.running_limit IS NULL OR p.running < p.running_limit)
                            RETURNING p.name)
                        UPDATE tasks t
                           SET state = 'running',
                               attempts = t.attempts + 1,
                               started_at = now(),
                               worker = p_worker,
                               lease_token = gen_random_uuid(),
                               lease_seconds = p_lease,
                               lease_expires_at = now() + make_interval(secs => p_lease)
                          FROM c
                         WHERE t.id = c.id AND (c.pool IS NULL OR EXISTS (SELECT 1 FROM slot))
                        RETURNING t.*;
                    ELSE
                        RETURN QUERY
                        WITH c AS (
                            SELECT x.id FROM unnest(v_cands) AS u(id)
                             CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                                  WHERE t.id = u.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                    FOR UPDATE SKIP LOCKED) x
                             LIMIT 1)
                        UPDATE tasks t
                           SET state = 'running',
                               attempts = t.attempts + 1,
                               started_at = now(),
                               worker = p_worker,
                               lease_token = gen_random_uuid(),
                               lease_seconds = p_lease,
                               lease_expires_at = now() + make_interval(secs => p_lease)
                          FROM c
                         WHERE t.id = c.id
                        RETURNING t.*;
                    END IF;
                    IF FOUND THEN
                        IF cardinality(v_park) > 0 THEN
                            PERFORM park_rows(v_park, v_locked, false, p_available, p_descending, p_limit = 1);
                        END IF;
                        RETURN;
                    END IF;
                END IF;
                -- A fitting row in a pool with room, not started (locked
                -- elsewhere, or its pool full under the lock): the general
                -- path asks its pool, from just before it (version 11).
                IF v_pooled THEN
                    v_lk := v_pk;
                    v_lid := v_pid - 1;
                    v_ask := true;
                    EXIT look;
                END IF;
                IF v_nfit > 0 THEN
                    -- Every fit read is locked by a concurrent claim (or was taken
                    -- since): the general path goes on after the last of them.
                    v_lk := v_hk;
                    v_lid := v_hid;
                    EXIT look;
                END IF;
                IF NOT v_hit THEN
                    RETURN;  -- read to the end: nothing fits
                END IF;
                -- Nothing that fits among the v_look rows: on from the last one.
                v_lk := v_hk;
                v_lid := v_hid;
                IF v_several THEN
                    -- A pile of other queues' (or too big) tasks, as long as
                    -- the listed queues' buckets are worth (version 11): each
                    -- listed queue's own window comes next, then the buckets.
                    v_walked := v_walked + v_look;
                    v_lwalk := false;
                    IF v_window OR v_remaining < c_exact THEN
                        -- Say so for the next claims of this session over
                        -- this list (version 14), as for one queue below;
                        -- below c_exact too (version 30), where those claims
                        -- go to the buckets at once (every bucket fits whole).
                        PERFORM set_config('taskqueue.dry_look', v_remaining::text || ':0:' || v_key, false);
                    END IF;
                    EXIT look;
                END IF;
                IF (v_global OR v_gdesc) AND v_remaining >= c_exact THEN
                    -- Every queue: step W's walk, here in plain statements
                    -- (version 11; W's windows number their rows through a
                    -- cursor, about twice the cost a row): on from the last
                    -- key read, c_walk rows per class per queue that has
                    -- claimable tasks (W's windows: 8), listing more queues (a
                    -- few first, then four times as many) only as the walk
                    -- outgrows those listed. The count listed is kept for the
                    -- session (taskqueue.queue_count), whose next first look
                    -- walks that far before it lists any (above): a count gone
                    -- stale costs one walk, never a row. Every listed queue's
                    -- share walked: the buckets (step 2). Only one queue: its
                    -- own look and buckets, as if it had been named.
                    v_walked := v_walked + v_look;
                    v_window := false;
                    v_per_queue := c_walk * v_class;
                    IF v_probe THEN
                        -- (version 39) Are every queue's fits few? If so,
                        -- step F's hint is set, and the look goes on from
                        -- the first of them after the last key read, not
                        -- along the walk (which may read to the far end).
                        v_probe := false;
                        IF count_few_fits(v_remaining) THEN
                            v_cands := few_fits(NULL, v_remaining, v_lk, v_lid, p_descending, v_full, 1);
                            IF cardinality(v_cands) = 0 THEN
                                RETURN;  -- nothing after the look fits
                            ELSIF v_cands IS NOT NULL THEN
                                SELECT CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END
                                  INTO v_lk FROM tasks t WHERE t.id = v_cands[1];
                                v_lid := v_cands[1] - 1;
                                v_look := c_scan;
                                CONTINUE look;
                            END IF;
                        END IF;
                    END IF;
                    IF NOT v_listed THEN  -- listed already when a hint sent this claim here first
                        v_queues := claimable_queues(NULL, c_list);
                        v_listed := true;
                        v_more := cardinality(v_queues) >= c_list;
                    END IF;
                    WHILE v_more AND v_walked >= cardinality(v_queues) * v_per_queue LOOP
                        v_want := 4 * cardinality(v_queues);
                        v_queues := v_queues || claimable_queues(v_queues[cardinality(v_queues)], v_want - cardinality(v_queues));
                        v_more := cardinality(v_queues) >= v_want;
                    END LOOP;
                    IF COALESCE(cardinality(v_queues), 0) IS DISTINCT FROM v_qcount THEN
                        PERFORM set_config('taskqueue.queue_count', COALESCE(cardinality(v_queues), 0)::text, false);
                        v_qcount := COALESCE(cardinality(v_queues), 0);
                    END IF;
                    IF cardinality(v_queues) > 1 THEN
                        IF v_walked < cardinality(v_queues) * v_per_queue THEN
                            v_look := cardinality(v_queues) * v_per_queue - v_walked;
                            v_walk := true;
                            CONTINUE look;
                        END IF;
                        EXIT look;
                    END IF;
                    EXIT look WHEN v_queues IS NULL;
                    IF v_gdesc THEN
                        -- One queue, descending: its buckets, then its windows
                        -- (the general path), on from the last row looked at.
                        v_gdesc := false;
                        EXIT look;
                    END IF;
                    v_global := false;
                END IF;
                IF v_round = 1 AND NOT v_several THEN
                    -- One queue, and its pile outgrew the look: say so for the
                    -- next claims of this session (v_hint, above). A list in
                    -- descending order goes the same way (version 22): its
                    -- buckets, then the look again from what they found.
                    PERFORM set_config('taskqueue.dry_look', v_remaining::text || ':0:' || v_key, false);
                END IF;
            END IF;
            EXIT look WHEN v_round >= 3;
            IF v_odesc THEN
                -- One queue, descending: past a dry look the general path
                -- asks the buckets and takes what they found in one
                -- statement (version 16), as step D did. Looking again from
                -- it cost each claim one more start of the look's statement,
                -- whose plan (its chunks and the read of its last key) is
                -- about twenty index scans: with one consumer on one
                -- priority whose newest 1% fit (falling_max), 0.80x of
                -- version 33's claims/s.
                v_window := false;
                EXIT look;
            END IF;
            -- Every queue below c_exact: fit_candidate probes every queue's
            -- small tasks at once (version 20).
            IF v_sarm THEN
                PERFORM set_config('taskqueue.any_size', p_available::text || ':0', false);
                v_sarm := false;
            END IF;
            SELECT f.id, f.k1, f.required, f.pool INTO v_c
              FROM fit_candidate(CASE WHEN v_global AND v_remaining < c_exact THEN NULL ELSE v_queues END,
                                 v_remaining, v_lk, v_lid, p_descending, v_full) f;
            IF v_c.id IS NULL THEN
                RETURN;  -- nothing after the look fits
            END IF;
            -- A pooled task too: the look starts it with its pool's slot
            -- (version 12; version 11 handed it to the general path).
            v_lk := v_c.k1;
            v_lid := v_c.id - 1;  -- the next look starts at this task
            v_look := c_scan;
        END LOOP look;
    END IF;

    IF p_available IS NULL AND NOT p_descending AND NOT p_peek AND (v_global OR cardinality(v_queues) = 1) THEN
        -- 0. Every task fits: lock the next rows in claim order in one statement.
        LOOP
            v_asked := p_limit - v_taken;
            v_seen := 0;
            IF v_global THEN
                OPEN v_cur FOR
                    SELECT t.id, t.priority::bigint AS k1, t.pool,
                           t.pool IS NOT NULL AND EXISTS (SELECT 1 FROM pools p
                                                           WHERE p.name = t.pool AND p.running_limit IS NOT NULL
                                                             AND p.running >= p.running_limit) AS full
                      FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                       AND (t.priority, t.id) > (v_lk::integer, v_lid)
                     ORDER BY t.priority, t.id
                     LIMIT v_asked
                       FOR UPDATE OF t SKIP LOCKED;
            ELSE
                OPEN v_cur FOR
                    SELECT t.id, t.priority::bigint AS k1, t.pool,
                           t.pool IS NOT NULL AND EXISTS (SELECT 1 FROM pools p
                                                           WHERE p.name = t.pool AND p.running_limit IS NOT NULL
                                                             AND p.running >= p.running_limit) AS full
                      FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                       AND (t.priority, t.id) > (v_lk::integer, v_lid)
                     ORDER BY t.priority, t.id
                     LIMIT v_asked
                       FOR UPDATE OF t SKIP LOCKED;
            END IF;
            LOOP
                FETCH v_cur INTO v_w;
                EXIT WHEN NOT FOUND;
                v_seen := v_seen + 1;
                v_lk := v_w.k1;
                v_lid := v_w.id;
                IF v_w.pool IS NOT NULL THEN
                    IF v_w.full AND NOT v_ask AND NOT v_w.pool = ANY (v_full) THEN
                        -- Full when read (version 25): no lock to learn it again.
                        -- Not the first pooled row after a look whose statement
                        -- found its pool full under the lock: this transaction
                        -- may hold that row, and take_pool_slot records it.
                        v_full := v_full || v_w.pool;
                    ELSIF NOT v_w.pool = ANY (v_full) THEN
                        SELECT s.got, s.locked INTO v_got, v_locked FROM take_pool_slot(v_w.pool, v_locked) s;
                        IF NOT v_got THEN
                            v_full := v_full || v_w.pool;
                        END IF;
                    END IF;
                    v_ask := false;
                    IF v_w.pool = ANY (v_full) THEN
                        IF cardinality(v_park) < c_park THEN
                            v_park := v_park || v_w.id;
                        END IF;
                        CONTINUE;
                    END IF;
                END IF;
                v_first_k := COALESCE(v_first_k, v_w.k1);
                v_bulk := v_bulk || v_w.id;
                v_taken := v_taken + 1;
            END LOOP;
            CLOSE v_cur;
            IF v_seen < v_asked THEN
                v_stop := true;  -- nothing claimable is left unlocked: steps 1 and 2 have nothing to find
                EXIT;
            END IF;
            EXIT WHEN v_taken >= p_limit OR cardinality(v_full) > 0;
        END LOOP;
    END IF;

    IF v_many THEN
        -- M. Several tasks, few fits (version 40): every fit after the key,
        -- read in claim order (few_fits, index only), taken in that order.
        v_mfew := COALESCE(v_fhint ~ '^few:[0-9]{1,19}$' AND p_available <= split_part(v_fhint, ':', 2)::numeric, false);
        IF NOT v_mfew THEN
            v_mfew := COALESCE(count_few_fits(v_remaining), false);
        END IF;
        IF v_mfew THEN
            -- Enough ids for the claim and some lost or too big; asked
            -- again from the last key when they run out.
            v_mn := GREATEST(2 * p_limit, c_scan);
            <<fits>>
            LOOP
                v_mids := few_fits(p_queues, v_remaining, v_lk, v_lid, p_descending, v_full, v_mn);
                EXIT fits WHEN v_mids IS NULL;  -- more fits than the budget: the general way, from the key
                v_mi := 0;
                LOOP
                    IF v_mi >= cardinality(v_mids) THEN
                        -- Every fit after the key was read: none is left.
                        v_stop := cardinality(v_mids) < v_mn;
                        EXIT fits WHEN v_stop;
                        CONTINUE fits;
                    END IF;
                    v_mi := v_mi + 1;
                    SELECT CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority::bigint END, t.required, t.pool
                      INTO v_mk, v_mreq, v_mpool
                      FROM tasks t WHERE t.id = v_mids[v_mi];
                    IF v_mk IS NULL THEN
                        CONTINUE;  -- deleted since the read
                    END IF;
                    v_lk := v_mk;  -- settled: the walk would have passed it too
                    v_lid := v_mids[v_mi];
                    CONTINUE WHEN v_mreq > v_remaining;  -- no longer fits what is left
                    IF v_mpool = ANY (v_full) THEN
                        IF cardinality(v_park) < c_park THEN
                            v_park := v_park || v_lid;
                        END IF;
                        CONTINUE;
                    END IF;
                    SELECT s.got, s.locked, s.full_pools INTO v_got, v_locked, v_full
                      FROM take_task(v_lid, v_mpool, false, v_locked, v_full) s;
                    IF NOT v_got THEN
                        IF v_mpool = ANY (v_full) AND cardinality(v_park) < c_park THEN
                            v_park := v_park || v_lid;
                        END IF;
                        CONTINUE;  -- its pool is full, or another transaction holds it
                    END IF;
                    v_first_k := COALESCE(v_first_k, v_mk);
                    v_bulk := v_bulk || v_lid;
                    v_remaining := v_remaining - v_mreq;
                    v_taken := v_taken + 1;
                    EXIT fits WHEN v_taken >= p_limit;
                END LOOP;
            END LOOP fits;
        END IF;
    END IF;

    <<picks>>
    LOOP
        EXIT WHEN v_stop OR v_taken >= p_limit;
        IF v_window THEN
            -- 1. The next rows in claim order after the last settled key, read
            -- lazily (a cursor): a dense head costs the few rows it takes to
            -- find a fit. Rows that cannot fit are filtered in SQL; the last
            -- row the window may read comes through as well (rn = v_cap), so
            -- the walk knows how far it went.
            v_took := false;
            v_parking := false;
            v_lost := false;
            v_end := true;
            IF v_global OR v_lwalk THEN
                -- Every queue, ascending: a window of c_scan rows of the claim
                -- order over every queue (version 8), or more when step W
                -- widens it (version 9). A list of several queues reads the
                -- same window and keeps its own rows (version 9; the rows of
                -- other queues come through with required NULL): before, it
                -- merged a 64-row window of each listed queue, 141 buffers a
                -- claim for 3 queues and 825 for 20, where the naive query
                -- read 5.
                v_cap := v_gcap;
                OPEN v_cur FOR
                    SELECT w.id, w.k1, CASE WHEN v_global OR w.queue IN (SELECT u.q FROM unnest(v_queues) AS u(q)) THEN w.required END AS required,
                           w.pool, w.rn,
                           (w.pool IS NOT NULL AND EXISTS (SELECT 1 FROM pools p WHERE p.name = w.pool AND p.running_limit IS NOT NULL
                                                             AND p.running >= p.running_limit)) AS seen_full
                      FROM (SELECT x.*, row_number() OVER () AS rn
                              FROM (SELECT t.id, t.priority::bigint AS k1, t.required, t.pool, t.queue FROM tasks t
                                     WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                       AND (t.priority, t.id) > (v_lk::integer, v_lid)
                                     ORDER BY t.priority, t.id LIMIT v_gcap) x) w
                     WHERE (w.required <= v_remaining AND (v_global OR w.queue IN (SELECT u.q FROM unnest(v_queues) AS u(q)))) OR w.rn = v_gcap;
            ELSIF v_gdesc THEN
                -- Every queue, descending (version 21): the rest of the
                -- current priority after the last key, from
                -- ix_tasks_claim_any, then the lower priorities in claim
                -- order from ix_tasks_claim_desc (version 22), read lazily
                -- up to v_gcap rows. A window that stops short of them is
                -- the end of the order.
                v_cap := v_gcap;
                OPEN v_cur FOR
                    SELECT w.id, w.k1, w.required, w.pool, w.rn,
                           (w.pool IS NOT NULL AND EXISTS (SELECT 1 FROM pools p WHERE p.name = w.pool AND p.running_limit IS NOT NULL
                                                             AND p.running >= p.running_limit)) AS seen_full
                      FROM (SELECT x.*, row_number() OVER () AS rn
                              FROM ((SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                                      WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                        AND (t.priority, t.id) > ((-v_lk)::integer, v_lid) AND t.priority <= (-v_lk)::integer
                                      ORDER BY t.priority, t.id LIMIT v_cap)
                                    UNION ALL
                                    (SELECT t.id, -t.priority::bigint, t.required, t.pool FROM tasks t
                                      WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                        AND t.priority < (-v_lk)::integer
                                      ORDER BY t.priority DESC, t.id LIMIT v_cap)
                                    LIMIT v_cap) x) w
                     WHERE w.required <= v_remaining OR w.rn = v_cap;
            ELSIF cardinality(v_queues) = 1 THEN
                IF v_again AND p_descending AND p_limit = 1 AND NOT p_peek THEN
                    -- After a lost row, one task (version 18): the next
                    -- window read in one statement, its fits ahead of any
                    -- pooled fit tried in order by a second one, which locks
                    -- and starts the first that no one has locked.
                    v_again := false;
                    WITH w AS MATERIALIZED (
                        SELECT x.id, x.k1, x.required, x.pool, row_number() OVER () AS rn
                          FROM ((SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                    AND (t.priority, t.id) > ((-v_lk)::integer, v_lid) AND t.priority <= (-v_lk)::integer
                                  ORDER BY t.priority, t.id LIMIT c_scan)
                                UNION ALL
                                (SELECT t.id, -t.priority::bigint, t.required, t.pool
                                   FROM (SELECT s.priority FROM tasks s
                                          WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_queues[1]
                                            AND s.priority < (-v_lk)::integer
                                          ORDER BY s.priority DESC LIMIT 1) g
                                  CROSS JOIN LATERAL (
                                      SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                                       WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                         AND t.priority >= g.priority AND t.priority <= g.priority
                                       ORDER BY t.priority, t.id LIMIT c_scan) t)
                                LIMIT c_scan) x),
                    p AS (SELECT COALESCE(min(f.rn), c_scan + 1) AS first FROM w f
                           WHERE f.pool IS NOT NULL AND f.required <= v_remaining)
                    SELECT array_agg(w.id ORDER BY w.rn) FILTER (WHERE w.required <= v_remaining AND w.rn < p.first),
                           min(p.first) <= c_scan,
                           COALESCE(bool_or(w.required <= v_remaining), false),
                           max(ARRAY[w.k1, w.id])
                      INTO v_wcands, v_wpooled, v_wfit, v_wlast
                      FROM w CROSS JOIN p;
                    IF cardinality(v_wcands) > 0 THEN
                        RETURN QUERY
                            WITH c AS (
                                SELECT y.id FROM unnest(v_wcands) AS u(id)
                                 CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                                      WHERE t.id = u.id AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                                                        FOR UPDATE SKIP LOCKED) y
                                 LIMIT 1)
                            UPDATE tasks t
                               SET state = 'running',
                                   attempts = t.attempts + 1,
                                   started_at = now(),
                                   worker = p_worker,
                                   lease_token = gen_random_uuid(),
                                   lease_seconds = p_lease,
                                   lease_expires_at = now() + make_interval(secs => p_lease)
                              FROM c
                             WHERE t.id = c.id
                            RETURNING t.*;
                        IF FOUND THEN
                            IF cardinality(v_park) > 0 THEN
                                PERFORM park_rows(v_park, v_locked, false, p_available, p_descending, p_limit = 1);
                            END IF;
                            RETURN;
                        END IF;
                    END IF;
                    IF NOT COALESCE(v_wpooled, false) THEN
                        -- Every fit read was locked elsewhere (or none fit):
                        -- settled as the cursor would settle them, and the
                        -- claim goes on after the last row read.
                        IF v_wlast IS NOT NULL THEN
                            v_lk := v_wlast[1];
                            v_lid := v_wlast[2];
                        END IF;
                        v_dfit := v_dfit OR v_wfit;
                        v_losses := v_losses + COALESCE(cardinality(v_wcands), 0);
                        v_window := v_wfit AND v_losses < c_lost;  -- else step K (version 33)
                        v_again := v_window;
                        CONTINUE picks;
                    END IF;
                    -- A pooled fit: the cursor below reads the same rows.
                END IF;
                -- One queue: a window of c_scan rows, read in index order.
                v_cap := c_scan;
                OPEN v_cur FOR
                    SELECT w.id, w.k1, w.required, w.pool, w.rn,
                           (w.pool IS NOT NULL AND EXISTS (SELECT 1 FROM pools p WHERE p.name = w.pool AND p.running_limit IS NOT NULL
                                                             AND p.running >= p.running_limit)) AS seen_full
                      FROM (SELECT x.*, row_number() OVER () AS rn
                              FROM ((SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                                      WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1]
                                        AND NOT p_descending AND (t.priority, t.id) > (v_lk::integer, v_lid)
                                      ORDER BY t.priority, t.id LIMIT c_scan)
                                    UNION ALL
                                    (SELECT t.id, -t.priority::bigint, t.required, t.pool FROM tasks t
                                      WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1] AND p_descending
                                        AND (t.priority, t.id) > ((-v_lk)::integer, v_lid) AND t.priority <= (-v_lk)::integer
                                      ORDER BY t.priority, t.id LIMIT c_scan)
                                    UNION ALL
                                    (SELECT t.id, -t.priority::bigint, t.required, t.pool
                                       FROM (SELECT s.priority FROM tasks s
                                              WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_queues[1]
                                                AND s.priority < (-v_lk)::integer AND p_descending
                                              ORDER BY s.priority DESC LIMIT 1) g
                                      CROSS JOIN LATERAL (
                                          SELECT t.* FROM tasks t
                                           WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queues[1] AND p_descending
                                             AND t.priority >= g.priority AND t.priority <= g.priority
                                           ORDER BY t.priority, t.id LIMIT c_scan) t)
                                    LIMIT c_scan) x) w
                     WHERE w.required <= v_remaining OR w.rn = c_scan;
            ELSE
                -- Several queues: each lists a prefix of its own order, merged.
                -- Descending, a list may stop early (two priority groups at
                -- most), so the window ends at the first queue's last listed
                -- key: everything up to there is listed from every queue.
                -- Ascending (version 9), each queue lists c_own (8) rows, not
                -- 64, and the window ends at the smallest last key of the
                -- queues that listed all 8 (the others are read to their end);
                -- its last row then comes through as rn = c_window, so the walk
                -- knows more may follow. 20 queues read 160 rows, not 1,280.
                v_cap := c_window;
                v_own := true;
                -- A single claim's first own windows, with no fit seen yet:
                -- dry, they are learnt (version 17).
                v_owatch := v_okey IS NOT NULL AND v_taken = 0 AND NOT v_dfit;
                OPEN v_cur FOR
                    WITH x AS (
                    SELECT q.name, x.id, x.k1, x.required, x.pool
                      FROM unnest(v_queues) AS q(name)
                     CROSS JOIN LATERAL (
                           (SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name
                               AND NOT p_descending AND (t.priority, t.id) > (v_lk::integer, v_lid)
                             ORDER BY t.priority, t.id LIMIT c_own)
                           UNION ALL
                           (SELECT t.id, -t.priority::bigint, t.required, t.pool FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND p_descending
                               AND (t.priority, t.id) > ((-v_lk)::integer, v_lid) AND t.priority <= (-v_lk)::integer
                             ORDER BY t.priority, t.id LIMIT c_window)
                           UNION ALL
                           (SELECT t.id, -t.priority::bigint, t.required, t.pool
                              FROM (SELECT s.priority FROM tasks s
                                     WHERE s.state = 'queued' AND NOT s.parked AND s.queue = q.name
                                       AND s.priority < (-v_lk)::integer AND p_descending
                                     ORDER BY s.priority DESC LIMIT 1) g
                             CROSS JOIN LATERAL (
                                 SELECT t.* FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND p_descending
                                    AND t.priority >= g.priority AND t.priority <= g.priority
                                  ORDER BY t.priority, t.id LIMIT c_window) t)
                           LIMIT c_window) x),
                    m AS (
                    SELECT x.id, x.k1, x.required, x.pool, row_number() OVER (ORDER BY x.k1, x.id) AS rn FROM x
                     WHERE ARRAY[x.k1, x.id] <= COALESCE(
                               (SELECT min(f.last) FROM (SELECT max(ARRAY[y.k1, y.id]) AS last, count(*) AS n
                                                           FROM x y GROUP BY y.name) f
                                 WHERE p_descending OR f.n >= c_own),
                               ARRAY[9223372036854775807, 9223372036854775807]::bigint[])),
                    e AS (
                    SELECT LEAST(count(*), c_window) AS last_rn,
                           count(*) > c_window OR EXISTS (SELECT 1 FROM x y GROUP BY y.name HAVING count(*) >= c_own) AS more
                      FROM m)
                    SELECT m.id, m.k1, m.required, m.pool,
                           CASE WHEN NOT p_descending AND m.rn = e.last_rn AND e.more THEN c_window::bigint ELSE m.rn END AS rn,
                           (m.pool IS NOT NULL AND EXISTS (SELECT 1 FROM pools p WHERE p.name = m.pool AND p.running_limit IS NOT NULL
                                                             AND p.running >= p.running_limit)) AS seen_full
                      FROM m CROSS JOIN e
                     WHERE m.rn <= c_window
                       AND (m.required <= v_remaining OR m.rn = c_window OR (NOT p_descending AND m.rn = e.last_rn))
                     ORDER BY m.rn;
            END IF;
            LOOP
                FETCH v_cur INTO v_w;
                EXIT WHEN NOT FOUND;
                v_lk := v_w.k1;
                v_lid := v_w.id;
                IF v_w.rn = v_cap THEN
                    v_end := false;  -- the window read all it may: more may follow
                END IF;
                CONTINUE WHEN v_w.required IS NULL OR v_w.required > v_remaining;  -- NULL: another queue's row
                v_dfit := true;
                IF v_w.seen_full AND NOT v_w.pool = ANY (v_full) THEN
                    -- Full when the window was read: neither its row nor its pool is locked to learn
                    -- it again (park_rows re-checks under the pool's lock before it parks).
                    v_full := v_full || v_w.pool;
                END IF;
                IF v_w.pool IS NULL OR NOT v_w.pool = ANY (v_full) THEN
                    SELECT s.got, s.locked, s.full_pools INTO v_got, v_locked, v_full
                      FROM take_task(v_w.id, v_w.pool, p_peek, v_locked, v_full) s;
                END IF;
                IF v_w.pool = ANY (v_full) THEN
                    IF cardinality(v_park) < c_park THEN
                        v_park := v_park || v_w.id;
                        v_parking := true;
                    END IF;
                    CONTINUE;
                END IF;
                IF NOT v_got THEN
                    v_lost := true;
                    v_losses := v_losses + 1;
                    IF v_losses >= c_lost THEN
                        -- Step K goes on from this row (version 33); the
                        -- window's rows after it are not settled.
                        v_end := false;
                        EXIT;
                    END IF;
                    CONTINUE;
                END IF;
                v_first_k := COALESCE(v_first_k, v_w.k1);
                v_bulk := v_bulk || v_w.id;
                v_remaining := v_remaining - v_w.required;
                v_taken := v_taken + 1;
                v_took := true;
                EXIT WHEN v_taken >= p_limit;
            END LOOP;
            CLOSE v_cur;
            IF v_owatch THEN
                -- The list's own windows read all they may and not one row
                -- fit: the next claims skip them too (version 17).
                v_owatch := false;
                IF NOT v_dfit AND NOT v_end THEN
                    PERFORM set_config('taskqueue.dry_look', v_remaining::text || ':0:' || v_okey, false);
                END IF;
            END IF;
            EXIT picks WHEN v_taken >= p_limit;
            -- Ascending, a window that did not read all it may is the end of
            -- the queues; descending, only over every queue (version 21), since
            -- the other descending windows span two priorities at most.
            EXIT picks WHEN v_end AND (NOT p_descending OR v_gdesc);
            -- Another window while it takes tasks, or parks full-pool rows (up
            -- to c_park a claim); else the buckets, which pass over the pools
            -- found full.
            -- Descending, a window that lost fits to concurrent claims and took
            -- nothing reads on after them, whatever is left (version 15), as
            -- after a row of the buckets lost the same way (below).
            v_again := p_descending AND v_lost AND NOT v_took AND v_losses < c_lost;  -- else step K
            v_window := ((v_took OR v_parking) AND v_remaining >= c_exact) OR v_again;
            IF v_lwalk AND NOT v_took AND NOT v_parking THEN
                -- The listed queues hold nothing that fits among the next rows
                -- of the shared order: each queue's own window from here on
                -- (once: rare queues are found there), then W and the buckets.
                v_lwalk := false;
                v_window := v_remaining >= c_exact AND NOT v_own;
            ELSIF v_took THEN
                v_lwalk := v_several;
            END IF;
            IF v_took THEN
                v_walked := 0;
            ELSE
                v_walked := v_walked + v_cap;
            END IF;
            v_gcap := c_scan;
        ELSE
            IF v_losses >= c_lost AND v_kread < c_kprobe::bigint * v_losses AND NOT p_peek THEN
                -- K (version 33). Fits keep turning out locked by other
                -- transactions: walk the claim order on and lock the first
                -- fit no one holds, in one statement, over at most v_kbudget
                -- rows. A walk that finds nothing settles every row up to its
                -- bound, and the key moves past them.
                -- One queue: ix_tasks_claim (queue, priority, id). Every queue,
                -- or a list of several: the order over every queue
                -- (ix_tasks_claim_any, ix_tasks_claim_desc), the budget counted
                -- over every queue's rows and a list's kept by a hash of it (as
                -- in step 1), so a walk reads at most the budget whatever the list.
                -- Ascending: the key of the budget's last row (an index-only
                -- read), then the rows up to it in one scan that locks as it
                -- goes, as the naive query does, in two parts: PostgreSQL 15 ends
                -- an index scan on priority < p or on priority = p AND id <= i,
                -- not on a row comparison. Descending (claim order priority DESC,
                -- id, which ix_tasks_claim does not have): the rest of one
                -- priority in id order, or the whole priorities below the key that
                -- hold fewer rows than the budget (their lowest found by reading
                -- the index backwards), sorted.
                IF p_descending THEN
                    v_kp := (-v_lk)::integer;
                    v_kfrom := v_lid;
                    v_kina := v_lid < 9223372036854775807;
                    IF p_queues IS NOT NULL AND cardinality(p_queues) = 1 THEN
                        LOOP
                            IF v_kina THEN
                                -- The rest of priority v_kp, in id order, up to the budget.
                                WITH b AS (SELECT t.id FROM tasks t
                                            WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1] AND t.priority = v_kp AND t.id > v_kfrom
                                            ORDER BY t.id
                                           OFFSET v_kbudget - 1 LIMIT 1)
                                SELECT (SELECT t.id FROM tasks t
                                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1] AND t.priority = v_kp AND t.id > v_kfrom
                                           AND t.id <= COALESCE((SELECT b.id FROM b), 9223372036854775807)
                                           AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                         ORDER BY t.id
                                         LIMIT 1
                                           FOR UPDATE SKIP LOCKED),
                                       (SELECT b.id FROM b)
                                  INTO v_kid, v_kb;
                                v_kmore := true;  -- the priorities below may hold more
                                v_klk := -v_kp;
                                v_klid := COALESCE(v_kb, 9223372036854775807);
                                -- Taken, or the budget spent in this priority, or read after
                                -- the step below chose it: done.
                                EXIT WHEN v_kid IS NOT NULL OR v_kb IS NOT NULL OR v_kfrom = 0;
                            END IF;
                            -- The priorities below v_kp: the one of the budget's last row,
                            -- read backwards (an index-only read).
                            v_kpl := (SELECT t.priority FROM tasks t
                                       WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1] AND t.priority < v_kp
                                       ORDER BY t.priority DESC, t.id DESC
                                      OFFSET v_kbudget - 1 LIMIT 1);
                            IF v_kpl IS NOT NULL
                               AND NOT EXISTS (SELECT 1 FROM tasks t
                                                WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1] AND t.priority < v_kp AND t.priority > v_kpl) THEN
                                -- The budget lies in one priority: read it in id order.
                                v_kp := v_kpl;
                                v_kfrom := 0;
                                v_kina := true;
                                CONTINUE;
                            END IF;
                            -- Whole priorities holding fewer rows than the budget.
                            v_kid := (SELECT t.id FROM tasks t
                                       WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1] AND t.priority < v_kp AND t.priority > COALESCE(v_kpl::bigint, -2147483649)
                                         AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                       ORDER BY t.priority DESC, t.id
                                       LIMIT 1
                                         FOR UPDATE SKIP LOCKED);
                            v_kmore := v_kpl IS NOT NULL;
                            v_klk := -v_kpl;
                            v_klid := 0;
                            EXIT;
                        END LOOP;
                    ELSE
                        LOOP
                            IF v_kina THEN
                                -- The rest of priority v_kp, in id order, up to the budget.
                                WITH b AS (SELECT t.id FROM tasks t
                                            WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.priority = v_kp AND t.id > v_kfrom
                                            ORDER BY t.id
                                           OFFSET v_kbudget - 1 LIMIT 1)
                                SELECT (SELECT t.id FROM tasks t
                                         WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                           AND (p_queues IS NULL OR t.queue IN (SELECT u.q FROM unnest(p_queues) AS u(q))) AND t.priority = v_kp AND t.id > v_kfrom
                                           AND t.id <= COALESCE((SELECT b.id FROM b), 9223372036854775807)
                                           AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                         ORDER BY t.id
                                         LIMIT 1
                                           FOR UPDATE SKIP LOCKED),
                                       (SELECT b.id FROM b)
                                  INTO v_kid, v_kb;
                                v_kmore := true;  -- the priorities below may hold more
                                v_klk := -v_kp;
                                v_klid := COALESCE(v_kb, 9223372036854775807);
                                -- Taken, or the budget spent in this priority, or read after
                                -- the step below chose it: done.
                                EXIT WHEN v_kid IS NOT NULL OR v_kb IS NOT NULL OR v_kfrom = 0;
                            END IF;
                            -- The priorities below v_kp: the one of the budget's last row,
                            -- read backwards (an index-only read).
                            v_kpl := (SELECT t.priority FROM tasks t
                                       WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.priority < v_kp
                                       ORDER BY t.priority DESC, t.id DESC
                                      OFFSET v_kbudget - 1 LIMIT 1);
                            IF v_kpl IS NOT NULL
                               AND NOT EXISTS (SELECT 1 FROM tasks t
                                                WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.priority < v_kp AND t.priority > v_kpl) THEN
                                -- The budget lies in one priority: read it in id order.
                                v_kp := v_kpl;
                                v_kfrom := 0;
                                v_kina := true;
                                CONTINUE;
                            END IF;
                            -- Whole priorities holding fewer rows than the budget.
                            v_kid := (SELECT t.id FROM tasks t
                                       WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                           AND (p_queues IS NULL OR t.queue IN (SELECT u.q FROM unnest(p_queues) AS u(q))) AND t.priority < v_kp AND t.priority > COALESCE(v_kpl::bigint, -2147483649)
                                         AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                       ORDER BY t.priority DESC, t.id
                                       LIMIT 1
                                         FOR UPDATE SKIP LOCKED);
                            v_kmore := v_kpl IS NOT NULL;
                            v_klk := -v_kpl;
                            v_klid := 0;
                            EXIT;
                        END LOOP;
                    END IF;
                ELSIF p_queues IS NOT NULL AND cardinality(p_queues) = 1 THEN
                    WITH b AS (SELECT t.priority, t.id FROM tasks t
                                WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                                  AND (t.priority, t.id) > (v_lk::integer, v_lid)
                                ORDER BY t.priority, t.id
                               OFFSET v_kbudget - 1 LIMIT 1),
                         e AS (SELECT COALESCE(b.priority, 2147483647) AS bp, COALESCE(b.id, 9223372036854775807) AS bid,
                                      b.id IS NOT NULL AS more
                                 FROM (SELECT 1) d LEFT JOIN b ON true)
                    SELECT COALESCE(
                               (SELECT t.id FROM tasks t
                                 WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                                   AND (t.priority, t.id) > (v_lk::integer, v_lid) AND t.priority < e.bp
                                   AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                 ORDER BY t.priority, t.id
                                 LIMIT 1
                                   FOR UPDATE SKIP LOCKED),
                               (SELECT t.id FROM tasks t
                                 WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queues[1]
                                   AND (t.priority, t.id) > (v_lk::integer, v_lid) AND t.priority = e.bp AND t.id <= e.bid
                                   AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                 ORDER BY t.id
                                 LIMIT 1
                                   FOR UPDATE SKIP LOCKED)),
                           e.more, e.bp, e.bid
                      INTO v_kid, v_kmore, v_klk, v_klid
                      FROM e;
                ELSE
                    WITH b AS (SELECT t.priority, t.id FROM tasks t
                                WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                  AND (t.priority, t.id) > (v_lk::integer, v_lid)
                                ORDER BY t.priority, t.id
                               OFFSET v_kbudget - 1 LIMIT 1),
                         e AS (SELECT COALESCE(b.priority, 2147483647) AS bp, COALESCE(b.id, 9223372036854775807) AS bid,
                                      b.id IS NOT NULL AS more
                                 FROM (SELECT 1) d LEFT JOIN b ON true)
                    SELECT COALESCE(
                               (SELECT t.id FROM tasks t
                                 WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                       AND (p_queues IS NULL OR t.queue IN (SELECT u.q FROM unnest(p_queues) AS u(q)))
                                   AND (t.priority, t.id) > (v_lk::integer, v_lid) AND t.priority < e.bp
                                   AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                 ORDER BY t.priority, t.id
                                 LIMIT 1
                                   FOR UPDATE SKIP LOCKED),
                               (SELECT t.id FROM tasks t
                                 WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0
                                       AND (p_queues IS NULL OR t.queue IN (SELECT u.q FROM unnest(p_queues) AS u(q)))
                                   AND (t.priority, t.id) > (v_lk::integer, v_lid) AND t.priority = e.bp AND t.id <= e.bid
                                   AND t.required <= v_remaining AND (t.pool IS NULL OR t.pool <> ALL (v_full))
                                 ORDER BY t.id
                                 LIMIT 1
                                   FOR UPDATE SKIP LOCKED)),
                           e.more, e.bp, e.bid
                      INTO v_kid, v_kmore, v_klk, v_klid
                      FROM e;
                END IF;
                v_kread := v_kread + v_kbudget;
                IF v_kid IS NULL THEN
                    -- Nothing to take in what it read: past it, and the next
                    -- walk may read twice as many.
                    EXIT picks WHEN NOT v_kmore;
                    v_lk := v_klk;
                    v_lid := v_klid;
                    v_kbudget := LEAST(2 * v_kbudget, c_kmax);
                    v_window := false;
                    CONTINUE picks;
                END IF;
                -- The types fit_candidate returns: v_c's plans are made for them.
                SELECT t.id::bigint AS id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority::bigint END AS k1,
                       t.required::integer AS required, t.pool::text AS pool
                  INTO v_c FROM tasks t WHERE t.id = v_kid;
            ELSE
                -- 2. The head holds nothing that fits: ask the buckets, per queue;
                -- every queue at once below c_exact (version 20).
                IF ((v_global OR v_gdesc) AND v_remaining >= c_exact) OR v_several THEN
                    -- W (version 9). Every queue: list the queues, a few first. Over
                    -- several queues (listed here or given), walk the shared claim
                    -- order on, v_per_queue rows per queue, before asking each
                    -- queue's buckets; a given list keeps its own rows (v_lwalk).
                    v_per_queue := 8 * required_class((LEAST(v_remaining, 2147483646) + 1)::integer);
                    IF NOT v_listed THEN
                        v_queues := claimable_queues(NULL, c_list);
                        v_listed := true;
                        v_more := cardinality(v_queues) >= c_list;
                    ELSIF v_more AND v_walked >= cardinality(v_queues) * v_per_queue THEN
                        v_want := 4 * cardinality(v_queues);
                        v_queues := v_queues || claimable_queues(v_queues[cardinality(v_queues)], v_want - cardinality(v_queues));
                        v_more := cardinality(v_queues) >= v_want;
                    END IF;
                    EXIT picks WHEN v_queues IS NULL;
                    IF v_gdesc AND cardinality(v_queues) IS DISTINCT FROM v_qcount THEN
                        -- How many queues this walk listed, for the session's next
                        -- first window (version 21): it walks that far before it
                        -- lists any. A count gone stale costs a walk, never a row.
                        v_qcount := cardinality(v_queues);
                        PERFORM set_config('taskqueue.queue_count', v_qcount::text, false);
                    END IF;
                    IF cardinality(v_queues) > 1 AND v_walked < cardinality(v_queues) * v_per_queue THEN
                        v_gcap := cardinality(v_queues) * v_per_queue - v_walked;
                        v_lwalk := v_several;
                        v_window := true;
                        CONTINUE picks;
                    END IF;
                    IF v_more THEN
                        CONTINUE picks;  -- the listed queues' share is walked: list more
                    END IF;
                    IF v_gdesc AND cardinality(v_queues) = 1 THEN
                        v_gdesc := false;  -- only one queue has claimable tasks: on as its claim
                    END IF;
                END IF;  -- else one queue
                IF v_sarm THEN
                    PERFORM set_config('taskqueue.any_size', p_available::text || ':0', false);
                    v_sarm := false;
                END IF;
                SELECT f.id, f.k1, f.required, f.pool INTO v_c
                  FROM fit_candidate(CASE WHEN ((v_global OR v_gdesc) AND v_remaining < c_exact) OR v_dany THEN NULL
                                          ELSE v_queues END,
                                     v_remaining, v_lk, v_lid, p_descending, v_full) f;
                EXIT picks WHEN v_c.id IS NULL;
            END IF;
            v_lk := v_c.k1;
            v_lid := v_c.id;
            IF p_limit = 1 AND NOT p_peek AND v_c.pool IS NULL THEN
                -- One task with no pool (version 16): locked and started in
                -- one statement, as the look starts its candidates, where
                -- take_task locked it and the final statement started it.
                RETURN QUERY
                    UPDATE tasks t
                       SET state = 'running',
                           attempts = t.attempts + 1,
                           started_at = now(),
                           worker = p_worker,
                           lease_token = gen_random_uuid(),
                           lease_seconds = p_lease,
                           lease_expires_at = now() + make_interval(secs => p_lease)
                     WHERE t.id = (SELECT s.id FROM tasks s
                                    WHERE s.id = v_c.id AND s.state = 'queued' COLLATE "C" AND NOT s.parked
                                      FOR UPDATE SKIP LOCKED)
                    RETURNING t.*;
                v_got := FOUND;
                IF v_got THEN
                    IF cardinality(v_park) > 0 THEN
                        PERFORM park_rows(v_park, v_locked, false, p_available, p_descending, p_limit = 1);
                    END IF;
                    RETURN;
                END IF;
            ELSE
                SELECT s.got, s.locked, s.full_pools INTO v_got, v_locked, v_full
                  FROM take_task(v_c.id, v_c.pool, p_peek, v_locked, v_full) s;
            END IF;
            IF NOT v_got THEN
                IF v_c.pool = ANY (v_full) AND cardinality(v_park) < c_park THEN
                    v_park := v_park || v_c.id;
                END IF;
                IF v_c.pool IS NULL OR v_c.pool <> ALL (v_full) THEN
                    v_losses := v_losses + 1;  -- another transaction holds it
                END IF;
                -- Taken by a concurrent claim (or its pool is full): the rows
                -- right after it in claim order are likely to fit too.
                -- Descending, a row lost to a concurrent claim sends the claim
                -- to the window whatever is left (version 15): below c_exact
                -- each descending bucket probe costs three descents, and with
                -- 8 consumers sent to the same row, a claim asked the buckets
                -- three times over (deadlines_max: 3.06 calls of fit_candidate
                -- a claim), where the window reads the next rows in order.
                IF v_dany AND (v_c.pool IS NULL OR v_c.pool <> ALL (v_full)) THEN
                    -- Every queue, not listed (version 20): the window needs
                    -- a queue. Only one queue has claimable tasks: on as that
                    -- queue's claim. Several: the buckets of every queue
                    -- again, from the lost row.
                    v_queues := claimable_queues(NULL, 2);
                    IF cardinality(v_queues) = 1 THEN
                        v_dany := false;
                        v_listed := true;
                    ELSE
                        v_queues := NULL;
                    END IF;
                END IF;
                v_again := p_descending AND NOT v_dany AND (v_c.pool IS NULL OR v_c.pool <> ALL (v_full));
                IF v_several AND (v_c.pool IS NULL OR v_c.pool <> ALL (v_full)) THEN
                    -- A list, ascending, a row lost whatever is left (version
                    -- 30): the shared window from it, as in the other order.
                    -- Below c_exact the buckets were asked again instead, and
                    -- with 8 consumers sent to the same row each claim asked
                    -- them 3.3 times (listed_deadlines).
                    v_again := true;
                    v_lwalk := true;
                END IF;
                -- From c_lost lost, ascending, step K walks instead (version 33).
                v_window := (v_remaining >= c_exact OR v_again) AND v_losses < c_lost;
                CONTINUE picks;
            END IF;
            v_first_k := COALESCE(v_first_k, v_c.k1);
            v_bulk := v_bulk || v_c.id;
            v_remaining := v_remaining - v_c.required;
            v_taken := v_taken + 1;
            v_walked := 0;
            v_kbudget := c_kfirst;
            -- After a find, the head may be dense again.
            v_window := v_remaining >= c_exact;
        END IF;
    END LOOP picks;

    IF p_peek THEN
        -- A claim would first promote due scheduled tasks; peek reads them as
        -- they are (few: any claim or the maintainer promotes them).
        SELECT t.id INTO v_c FROM tasks t
         WHERE t.state = 'scheduled' AND t.run_at <= now()
           AND (p_queues IS NULL OR t.queue = ANY (p_queues))
           AND t.required <= COALESCE(p_available, 9223372036854775807)
           AND (t.pool IS NULL OR NOT EXISTS (SELECT 1 FROM pools p
                                               WHERE p.name = t.pool AND p.running_limit IS NOT NULL
                                                 AND p.running >= p.running_limit))
           AND (CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.id)
               < (COALESCE(v_first_k, 9223372036854775807), COALESCE(v_bulk[1], 9223372036854775807))
         ORDER BY CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.id
         LIMIT 1;
        IF v_c.id IS NOT NULL THEN
            v_bulk := ARRAY[v_c.id];
        END IF;
        RETURN QUERY SELECT * FROM tasks t WHERE t.id = ANY (v_bulk[1:1]);
        RETURN;
    END IF;

    IF cardinality(v_bulk) = 0 THEN
        IF cardinality(v_park) > 0 THEN
            PERFORM park_rows(v_park, v_locked, true, p_available);  -- every fit seen is in a full pool
        END IF;
        RETURN;  -- nothing chosen: no statement to run (version 7)
    END IF;

    -- Start what was chosen in one statement; return it in claim order.
    -- Then park (version 24): a task started is no longer queued, so
    -- park_rows passes it by.
    RETURN QUERY
        WITH u AS (
            UPDATE tasks
               SET state = 'running',
                   attempts = attempts + 1,
                   started_at = now(),
                   worker = p_worker,
                   lease_token = gen_random_uuid(),
                   lease_seconds = p_lease,
                   lease_expires_at = now() + make_interval(secs => p_lease)
             WHERE id = ANY (v_bulk)
            RETURNING *)
        SELECT u.* FROM u JOIN unnest(v_bulk) WITH ORDINALITY AS b(id, n) ON b.id = u.id ORDER BY b.n;
    IF cardinality(v_park) > 0 THEN
        PERFORM park_rows(v_park, v_locked, false, p_available, p_descending, p_limit = 1);
    END IF;
    RETURN;
END
$fn$;
