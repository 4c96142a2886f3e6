package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Tokens without a server: parsing, order, ZooKeeper's arithmetic. */
class TokenTest {
    @Test
    void parsesAndPrintsAsTheServer() {
        assertEquals(new Token(3, 42), Token.parse("3:42"));
        assertEquals(new Token(0, 7), Token.parse(" 7 "));
        assertEquals("3:42", new Token(3, 42).toString());
        assertEquals(new Token(Long.MAX_VALUE, Long.MAX_VALUE), Token.parse("9223372036854775807:9223372036854775807"));
        for (String bad : List.of("", ":", "1:", ":1", "-1:2", "1:2:3", "a:1", "9223372036854775808:0")) {
            assertThrows(IllegalArgumentException.class, () -> Token.parse(bad), bad);
        }
    }

    @Test
    void ordersEpochFirst() {
        assertTrue(new Token(1, 0).isNewerThan(new Token(0, 999)));
        assertTrue(new Token(1, 2).isNewerThan(new Token(1, 1)));
        assertEquals(0, new Token(1, 2).compareTo(new Token(1, 2)));
    }

    @Test
    void zxidsAsFenceFromZxid() {
        assertEquals(new Token(0, 27), Token.fromZxid(27, 0));
        assertEquals(new Token(3, 4), Token.fromZxid((3L << 32) | 4, 0));
        assertEquals(new Token((2L << 32) | 3, 4), Token.fromZxid((3L << 32) | 4, 2));
        assertTrue(Token.fromZxid(5, 1).isNewerThan(Token.fromZxid(Long.MAX_VALUE, 0)), "a raised generation wins");
    }
}
