-- Placeholder (stop 24): number 12 is reserved for another branch's
-- migration. The runner needs migrations numbered 1..n without gaps, so this
-- branch carries an empty 11 and 12 to be able to ship its 13. Drop this
-- file at merge in favour of the real 0012.
SELECT 1;
