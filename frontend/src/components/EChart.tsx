// Thin ECharts wrapper. Only the chart types and components registered below
// are bundled (tree-shaken via echarts/core); register more as pages need
// them (bar charts, datasets and titles are not used yet). Import this from lazily loaded pages so echarts stays out of the
// entry chunk.

import { LineChart } from "echarts/charts";
import { GridComponent, LegendComponent, MarkLineComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import type { EChartsCoreOption, EChartsType } from "echarts/core";
import { useEffect, useRef } from "react";

echarts.use([LineChart, GridComponent, TooltipComponent, LegendComponent, MarkLineComponent, CanvasRenderer]);

export interface EChartProps {
  option: EChartsCoreOption;
  /** CSS height; the width follows the container. */
  height?: number | string;
  /** Accessible description of what the chart shows (charts are images to a screen reader). */
  ariaLabel: string;
  loading?: boolean;
  className?: string;
  /** Replace the whole option instead of merging (default true). */
  notMerge?: boolean;
  onReady?: (chart: EChartsType) => void;
}

export function EChart({ option, height = 280, ariaLabel, loading, className, notMerge = true, onReady }: EChartProps) {
  const ref = useRef<HTMLDivElement>(null);
  const chartRef = useRef<EChartsType | null>(null);

  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const chart = echarts.init(el, undefined, { renderer: "canvas" });
    chartRef.current = chart;
    onReady?.(chart);
    const observer = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => chart.resize()) : null;
    observer?.observe(el);
    return () => {
      observer?.disconnect();
      chart.dispose();
      chartRef.current = null;
    };
    // onReady is deliberately only called once per mount.
  }, []);

  useEffect(() => {
    chartRef.current?.setOption(option, { notMerge, lazyUpdate: true });
  }, [option, notMerge]);

  useEffect(() => {
    const chart = chartRef.current;
    if (!chart) return;
    if (loading) chart.showLoading();
    else chart.hideLoading();
  }, [loading]);

  return <div ref={ref} className={className} style={{ width: "100%", height }} role="img" aria-label={ariaLabel} />;
}
