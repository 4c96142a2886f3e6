-- Malformed fences are refused with 22P02 or 22003.
SET search_path = public, fencing;
SELECT ''::fence;
SELECT '-1'::fence;
SELECT '9223372036854775808'::fence;
