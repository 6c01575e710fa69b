/** Time as the domain sees it: Unix seconds. Tests pass a clock they can move. */
export interface Clock {
  nowSeconds(): number;
}

export const systemClock: Clock = {
  nowSeconds: () => Math.floor(Date.now() / 1000),
};
