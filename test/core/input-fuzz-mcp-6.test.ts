import t from 'tap';
import { fuzzingApp } from '../helpers/input-fuzz-app.ts';

// Input fuzzing (test/helpers/input-fuzz-app.ts): the tools at /mcp in shard 6.
const fuzzing = await fuzzingApp(t);
t.test('every tool at /mcp in mcp shard 6', async (t) => fuzzing.fuzzMcp(t, 6));
