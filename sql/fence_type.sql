-- The fence type: text I/O, ordering, constructors and accessors.
SET search_path = public, fencing;

SELECT '3:42'::fence, '42'::fence, '  7:0  '::fence;
SELECT '42'::fence = '0:42'::fence AS bare_counter_is_epoch_zero;
SELECT fence(3, 42), epoch('3:42'), counter('3:42');
SELECT fence(NULL, 1) IS NULL AS null_in_null_out;
SELECT next('3:42'), next_epoch('3:42');
SELECT '1:0'::fence > '0:9223372036854775807'::fence AS epoch_dominates;
