import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';

/**
 * PostgreSQL only: the shared rate-limit log (src/ratelimit/postgres.ts). One row per key that
 * was used in the last minute: its acceptances as counts in small time buckets, oldest first;
 * `lasts[i]` is the time (epoch µs, the database's clock) of the latest acceptance in the bucket
 * holding `counts[i]` of them, and `total` their sum. UNLOGGED: the log is worth one minute, so
 * it costs no WAL and no flush at commit; a crash of PostgreSQL empties it (each key may then
 * take one fresh burst). SQLite needs nothing: one server per file, so its limiter is in memory.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;

  await sql`
    create unlogged table rate_limit_windows (
      key_id text primary key,
      lasts bigint[] not null,
      counts integer[] not null,
      total bigint not null,
      expires_us bigint not null
    ) with (fillfactor = 50)`.execute(db);

  // One round trip per request. The row lock (FOR UPDATE) serialises one key's decisions across
  // every instance; the clock is the database's, read after the lock, so all instances judge by
  // one clock and one key's acceptances are stamped in the order they were decided. A bucket
  // counts all its acceptances until its latest one has left the window, so the limiter errs
  // only towards refusing (by less than one bucket): never more than p_limit acceptances in any
  // rolling window. Refusals write nothing unless they drop buckets that have left.
  // p_now_us is for tests only.
  await sql`
    create function rate_limit_take(p_key text, p_limit bigint, p_window_ms bigint, p_bucket_ms bigint, p_now_us bigint default null)
    returns table (allowed boolean, used bigint, free_at_us bigint, now_us bigint)
    language plpgsql volatile as $fn$
    declare
      v_lasts bigint[];
      v_counts integer[];
      v_total bigint;
      v_now bigint;
      v_window bigint := p_window_ms * 1000;
      v_bucket bigint := p_bucket_ms * 1000;
      v_n integer;
      v_first integer := 1;
      v_left bigint;
      v_allowed boolean;
      v_free bigint;
    begin
      loop
        select w.lasts, w.counts, w.total into v_lasts, v_counts, v_total
          from rate_limit_windows w where w.key_id = p_key for update;
        exit when found;
        insert into rate_limit_windows (key_id, lasts, counts, total, expires_us)
          values (p_key, '{}', '{}', 0, 0) on conflict (key_id) do nothing;
      end loop;

      v_now := coalesce(p_now_us, floor(extract(epoch from clock_timestamp()) * 1000000)::bigint);
      v_n := coalesce(array_length(v_lasts, 1), 0);
      while v_first <= v_n and v_lasts[v_first] + v_window <= v_now loop
        v_total := v_total - v_counts[v_first];
        v_first := v_first + 1;
      end loop;
      if v_first > 1 then
        v_lasts := v_lasts[v_first:v_n];
        v_counts := v_counts[v_first:v_n];
        v_n := v_n - v_first + 1;
      end if;

      v_allowed := v_total < p_limit;
      if v_allowed then
        -- The newest bucket takes it when it is still open (or the clock stepped back): its
        -- latest time only ever moves later.
        if v_n > 0 and v_lasts[v_n] / v_bucket >= v_now / v_bucket then
          v_lasts[v_n] := greatest(v_lasts[v_n], v_now);
          v_counts[v_n] := v_counts[v_n] + 1;
        else
          v_lasts := v_lasts || v_now;
          v_counts := v_counts || 1;
          v_n := v_n + 1;
        end if;
        v_total := v_total + 1;
      end if;
      if v_allowed or v_first > 1 then
        update rate_limit_windows
          set lasts = v_lasts, counts = v_counts, total = v_total, expires_us = coalesce(v_lasts[v_n], 0) + v_window
          where key_id = p_key;
      end if;

      -- When enough of the oldest buckets will have left for a request to be accepted.
      if v_total >= p_limit then
        v_left := v_total;
        for i in 1..v_n loop
          v_left := v_left - v_counts[i];
          if v_left < p_limit then
            v_free := v_lasts[i] + v_window;
            exit;
          end if;
        end loop;
      end if;

      allowed := v_allowed;
      used := v_total;
      free_at_us := v_free;
      now_us := v_now;
      return next;
    end
    $fn$`.execute(db);
}
