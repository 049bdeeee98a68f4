import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { StreamSlots } from '../src/events/slots.js';

describe('event stream slots', () => {
  it('refuses a client at its own cap before the total, and the total whoever asks', () => {
    const slots = new StreamSlots({ total: 3, perClient: 2 });
    assert.equal(slots.take('token:a'), null);
    assert.equal(slots.take('token:a'), null);
    assert.equal(slots.take('token:a'), 'client');
    assert.equal(slots.take('ip:192.0.2.1'), null);
    assert.equal(slots.take('ip:192.0.2.2'), 'total');
    assert.equal(slots.take('token:a'), 'client', 'a client at its cap hears about its own cap');
    assert.equal(slots.open, 3);
  });

  it('a released slot is free again, for its client and in the total', () => {
    const slots = new StreamSlots({ total: 2, perClient: 2 });
    slots.take('token:a');
    slots.take('token:a');
    assert.equal(slots.take('token:b'), 'total');
    slots.release('token:a');
    assert.equal(slots.open, 1);
    assert.equal(slots.take('token:b'), null);
    assert.equal(slots.take('token:a'), 'total');
    slots.release('token:a');
    slots.release('token:b');
    assert.equal(slots.open, 0);
    assert.equal(slots.take('token:a'), null);
    assert.equal(slots.take('token:a'), null);
  });
});
