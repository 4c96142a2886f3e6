# A throwaway cluster loads the extension (smoke test of the TAP harness).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('smoke');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
is($node->safe_psql('postgres', "SELECT '3:42'::fencing.fence::text"), '3:42', 'round trip');
$node->stop;
done_testing();
